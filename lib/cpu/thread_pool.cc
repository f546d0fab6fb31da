#include "cpu/thread_pool.h"

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <exception>
#include <mutex>
#include <thread>
#include <utility>
#include <vector>

#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "core/error.h"

#ifdef SEQTRANS_BLAS_THREADS
// The library's own setter, found by CMake (its header may not be the cblas.h we include).
extern "C" void SEQTRANS_BLAS_THREADS(int threads);
#endif
#ifdef SEQTRANS_BLAS_THREAD_SHUTDOWN
// OpenBLAS's end to its server threads (exported, not in its headers). A later multi-threaded call of the
// library's would start them again; with one thread it makes none.
extern "C" int SEQTRANS_BLAS_THREAD_SHUTDOWN(void);
#endif

namespace seqtrans::cpu {
namespace {

// How long a waiting thread polls before it sleeps: longer than the gap between two ops of a step (so a
// step's ops hand over without a futex), short enough that an idle worker gives its core back at once.
constexpr std::chrono::microseconds kSpin{50};

void relax() {
#if defined(__x86_64__) || defined(__i386__)
  _mm_pause();
#else
  std::this_thread::yield();
#endif
}

// Polls `ready` for kSpin; true if it became true.
template <class Ready>
bool spin_until(const Ready& ready) {
  const auto deadline = std::chrono::steady_clock::now() + kSpin;
  for (int i = 0;; ++i) {
    if (ready()) return true;
    relax();
    if ((i & 63) == 63 && std::chrono::steady_clock::now() > deadline) return ready();
  }
}

// The BLAS library runs inside the pool's parts, on one thread. OpenBLAS started its own server threads
// when it loaded, and one thread set leaves them polling a core with sched_yield until ~2^28 cycles after
// their last job (0.1 s: a one-line translate's whole run, on a 2-core machine half its CPU): they are
// ended here, where the library has the call.
void make_blas_single_threaded() {
#ifdef SEQTRANS_BLAS_THREADS
  SEQTRANS_BLAS_THREADS(1);
#endif
#ifdef SEQTRANS_BLAS_THREAD_SHUTDOWN
  SEQTRANS_BLAS_THREAD_SHUTDOWN();
#endif
}

class Pool {
 public:
  explicit Pool(int threads) {
    make_blas_single_threaded();
    start(threads);
  }
  ~Pool() { stop(); }
  Pool(const Pool&) = delete;
  Pool& operator=(const Pool&) = delete;

  int threads() const { return threads_.load(std::memory_order_relaxed); }

  void resize(int threads) {
    const std::lock_guard<std::mutex> submit(submit_);  // no op in flight
    if (threads == this->threads()) return;
    stop();
    start(threads);
  }

  void run(int parts, const PartTask& task) {
    std::unique_lock<std::mutex> submit(submit_, std::try_to_lock);
    if (!submit.owns_lock() || workers_.empty() || parts <= 1) {
      for (int part = 0; part < parts; ++part) task(part);
      return;
    }
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      // Workers that joined the last op late leave without the lock; none may carry its task into this one.
      while (busy_.load(std::memory_order_acquire) > 0) relax();
      task_ = &task;
      parts_ = parts;
      pending_.store(parts, std::memory_order_relaxed);
      next_.store(0, std::memory_order_relaxed);
      generation_.fetch_add(1, std::memory_order_release);
      if (sleepers_ > 0) wake_.notify_all();
    }
    run_parts_of(task, parts);
    const bool done = spin_until([this] { return pending_.load(std::memory_order_acquire) == 0; });
    std::unique_lock<std::mutex> lock(done_mutex_);
    if (!done) {
      caller_sleeping_ = true;
      done_.wait(lock, [this] { return pending_.load(std::memory_order_acquire) == 0; });
      caller_sleeping_ = false;
    }
    // A part's error reaches the caller once every part has finished (they all read the caller's data).
    if (error_) std::rethrow_exception(std::exchange(error_, nullptr));
  }

 private:
  void start(int threads) {
    stopping_ = false;
    threads_.store(threads, std::memory_order_relaxed);
    for (int i = 1; i < threads; ++i) workers_.emplace_back([this] { work(); });
  }

  void stop() {
    {
      const std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
      stop_flag_.store(true, std::memory_order_relaxed);
      wake_.notify_all();
    }
    for (std::thread& worker : workers_) worker.join();
    workers_.clear();
    stop_flag_.store(false, std::memory_order_relaxed);
  }

  void run_parts_of(const PartTask& task, int parts) {
    for (int part; (part = next_.fetch_add(1, std::memory_order_acq_rel)) < parts;) {
      try {
        task(part);
      } catch (...) {
        const std::lock_guard<std::mutex> lock(done_mutex_);
        if (!error_) error_ = std::current_exception();
      }
      if (pending_.fetch_sub(1, std::memory_order_acq_rel) == 1) {
        const std::lock_guard<std::mutex> lock(done_mutex_);
        if (caller_sleeping_) done_.notify_one();
      }
    }
  }

  void work() {
    uint64_t seen = generation_.load(std::memory_order_acquire);
    for (;;) {
      const auto has_work = [&] {
        return generation_.load(std::memory_order_acquire) != seen || stop_flag_.load(std::memory_order_relaxed);
      };
      const PartTask* task = nullptr;
      int parts = 0;
      {
        const bool woke = spin_until(has_work);
        std::unique_lock<std::mutex> lock(mutex_);
        if (!woke) {
          ++sleepers_;
          wake_.wait(lock, [&] { return generation_.load(std::memory_order_acquire) != seen || stopping_; });
          --sleepers_;
        }
        if (stopping_) return;
        seen = generation_.load(std::memory_order_acquire);
        task = task_;
        parts = parts_;
        busy_.fetch_add(1, std::memory_order_acq_rel);
      }
      run_parts_of(*task, parts);
      busy_.fetch_sub(1, std::memory_order_acq_rel);
    }
  }

  std::mutex submit_;  // held by the op in flight (and by resize)
  // Guards handing out an op: a worker takes it only to join one, never while it holds a part (the
  // caller waits under it for the last op's workers to leave).
  std::mutex mutex_;
  std::condition_variable wake_;
  const PartTask* task_ = nullptr;
  int parts_ = 0;
  int sleepers_ = 0;
  bool stopping_ = false;
  std::mutex done_mutex_;  // guards what follows: the end of an op
  std::condition_variable done_;
  bool caller_sleeping_ = false;
  std::exception_ptr error_;  // the op's first error
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> next_{0}, pending_{0}, busy_{0};
  std::atomic<bool> stop_flag_{false};
  std::atomic<int> threads_{1};
  std::vector<std::thread> workers_;
};

int default_threads() { return static_cast<int>(std::max(1u, std::thread::hardware_concurrency())); }

Pool& pool() {
  static Pool instance(default_threads());
  return instance;
}

}  // namespace

int threads() { return pool().threads(); }

void set_threads(int threads) {
  SEQTRANS_CHECK(threads >= 1, "CPU threads must be at least 1, got {}", threads);
  pool().resize(threads);
}

void run_parts(int parts, const PartTask& task) { pool().run(parts, task); }

}  // namespace seqtrans::cpu
