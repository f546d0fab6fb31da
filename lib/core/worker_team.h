// A few threads that share one loop's parts with the calling thread: the host work between two decoder
// steps (every sentence's search reading its rows), which the GPU waits on. Steps come every few hundred
// microseconds, so an idle worker spins a while before it sleeps: a wake-up through the kernel would cost
// as much as the work it shares.
#pragma once

#include <atomic>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace seqtrans {

class WorkerTeam {
 public:
  // `workers` threads besides the caller; 0 makes run() a plain loop on the caller.
  explicit WorkerTeam(int workers);
  ~WorkerTeam();
  WorkerTeam(const WorkerTeam&) = delete;
  WorkerTeam& operator=(const WorkerTeam&) = delete;

  // Threads that run parts, the caller included.
  int size() const { return static_cast<int>(threads_.size()) + 1; }
  // Calls body(part) once for every part in [0, parts), on the caller and the workers, and returns when
  // all are done. What a part throws is rethrown here (the first one; the other parts still run).
  void run(int parts, const std::function<void(int)>& body);

 private:
  void work();
  // Claims the next part of job `generation`; false once it has none left (or a later job began).
  bool claim(uint32_t generation, int& part);
  void run_part(int part);

  // The job in flight: its generation, its number of parts and the next unclaimed part, in one word. A
  // worker claims parts only of the generation it saw, so a late one never runs a part of the next job.
  std::atomic<uint64_t> ticket_{0};
  std::atomic<int> finished_{0};
  const std::function<void(int)>* body_ = nullptr;  // set before the ticket is published
  std::exception_ptr failure_;
  std::mutex failure_mutex_;

  std::mutex sleep_mutex_;
  std::condition_variable wake_;
  std::atomic<int> sleeping_{0};
  std::atomic<bool> stopping_{false};
  std::vector<std::thread> threads_;
};

}  // namespace seqtrans
