// One background thread running posted tasks in order. The translator gives it its text work
// (tokenizing the next lines, detokenizing finished ones) so that this work overlaps the decoder steps
// the calling thread drives, instead of leaving the GPU idle while the host handles text.
#pragma once

#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <future>
#include <memory>
#include <mutex>
#include <thread>
#include <type_traits>
#include <utility>

namespace seqtrans {

class WorkerThread {
 public:
  WorkerThread() : thread_([this] { run(); }) {}
  // Runs what is queued, then joins.
  ~WorkerThread() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_one();
    thread_.join();
  }
  WorkerThread(const WorkerThread&) = delete;
  WorkerThread& operator=(const WorkerThread&) = delete;

  // Queues `task`; its result, or the exception it threw, comes through the future.
  template <typename Task>
  std::future<std::invoke_result_t<Task>> post(Task task) {
    auto packaged = std::make_shared<std::packaged_task<std::invoke_result_t<Task>()>>(std::move(task));
    std::future<std::invoke_result_t<Task>> result = packaged->get_future();
    {
      std::lock_guard<std::mutex> lock(mutex_);
      tasks_.emplace_back([packaged] { (*packaged)(); });
    }
    wake_.notify_one();
    return result;
  }

 private:
  void run() {
    for (;;) {
      std::function<void()> task;
      {
        std::unique_lock<std::mutex> lock(mutex_);
        wake_.wait(lock, [this] { return stopping_ || !tasks_.empty(); });
        if (tasks_.empty()) return;  // stopping, and nothing left
        task = std::move(tasks_.front());
        tasks_.pop_front();
      }
      task();  // a packaged_task: what it throws goes to its future
    }
  }

  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> tasks_;
  bool stopping_ = false;
  std::thread thread_;  // last: starts once the members above exist
};

// Whether a future's result is there without waiting.
template <typename T>
bool is_ready(const std::future<T>& future) {
  return future.wait_for(std::chrono::seconds(0)) == std::future_status::ready;
}

}  // namespace seqtrans
