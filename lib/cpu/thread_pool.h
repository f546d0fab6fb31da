// The CPU backend's threads: one process-wide pool that runs the parts of an op on the caller and its
// workers. The BLAS library runs single-threaded inside it, so that no second set of threads spins
// against ours (OpenBLAS' own threads yield in a loop while they wait: on a 2-core machine that was
// half of all CPU time, most of it in the kernel).
#pragma once

#include <algorithm>
#include <cstdint>

namespace seqtrans::cpu {

// A callable by reference, without std::function's allocation: body(part) for part in [0, parts).
class PartTask {
 public:
  template <class Body>
  explicit PartTask(const Body& body)
      : body_(&body), call_([](const void* b, int part) { (*static_cast<const Body*>(b))(part); }) {}
  void operator()(int part) const { call_(body_, part); }

 private:
  const void* body_;
  void (*call_)(const void*, int);
};

// Threads the pool computes with, the caller included (at least 1). The first call of any function here
// starts the pool.
int threads();
// Sets them (threads >= 1; the default is the machine's cores). Also makes the BLAS library
// single-threaded, which the pool relies on.
void set_threads(int threads);

// Runs task(part) for every part in [0, parts), spread over the pool; returns when all are done. A caller
// that finds the pool busy (another engine's op) runs its parts alone.
void run_parts(int parts, const PartTask& task);

// How many ranges parallel_for splits [0, count) into (count >= 1).
inline int64_t parallel_for_parts(int64_t count, int64_t grain, int max_parts = 0) {
  const int limit = max_parts > 0 ? max_parts : 2 * threads();
  return std::max<int64_t>(1, std::min<int64_t>(limit, count / std::max<int64_t>(1, grain)));
}

// The length of parallel_for's ranges but the last (which may be shorter): the longest.
inline int64_t parallel_for_step(int64_t count, int64_t grain, int max_parts = 0) {
  const int64_t parts = parallel_for_parts(count, grain, max_parts);
  return (count + parts - 1) / parts;
}

// body(begin, end) over contiguous ranges covering [0, count), each at least `grain` long (the last may be
// shorter), at most `max_parts` of them (0 = twice the threads: a late worker leaves less to wait for).
template <class Body>
void parallel_for(int64_t count, int64_t grain, const Body& body, int max_parts = 0) {
  if (count <= 0) return;
  const int64_t parts = parallel_for_parts(count, grain, max_parts);
  if (parts == 1) return body(int64_t{0}, count);
  const int64_t step = parallel_for_step(count, grain, max_parts);
  const auto part_body = [&](int part) {
    const int64_t begin = part * step, end = std::min(count, begin + step);
    if (begin < end) body(begin, end);
  };
  run_parts(static_cast<int>(parts), PartTask(part_body));
}

}  // namespace seqtrans::cpu
