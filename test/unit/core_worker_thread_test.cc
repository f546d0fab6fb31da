// The translator's text worker: tasks run in the order posted, off the calling thread, and what a task
// throws reaches whoever waits for its result.
#include <atomic>
#include <stdexcept>
#include <thread>
#include <vector>

#include "catch.h"
#include "core/worker_thread.h"

using namespace seqtrans;

TEST_CASE("a worker thread runs tasks in order, off the caller's thread", "[unit]") {
  WorkerThread worker;
  std::vector<int> order;  // written by the worker only, read after every future is back
  std::vector<std::future<std::thread::id>> results;
  for (int i = 0; i < 100; ++i)
    results.push_back(worker.post([&order, i] {
      order.push_back(i);
      return std::this_thread::get_id();
    }));
  for (auto& result : results) CHECK(result.get() != std::this_thread::get_id());
  std::vector<int> expected(100);
  for (int i = 0; i < 100; ++i) expected[i] = i;
  CHECK(order == expected);
}

TEST_CASE("a worker thread's task exception reaches its future, and the worker goes on", "[unit]") {
  WorkerThread worker;
  auto failing = worker.post([]() -> int { throw std::runtime_error("bad line"); });
  auto next = worker.post([] { return 7; });
  while (!is_ready(next)) std::this_thread::yield();
  CHECK_THROWS_WITH(failing.get(), "bad line");
  CHECK(next.get() == 7);
  CHECK_FALSE(next.valid());  // a future gives its value once
}

TEST_CASE("a worker thread finishes its queued tasks before it is destroyed", "[unit]") {
  std::atomic<int> done{0};
  {
    WorkerThread worker;
    for (int i = 0; i < 50; ++i)
      worker.post([&done] {
        std::this_thread::sleep_for(std::chrono::microseconds(100));
        ++done;
      });
  }
  CHECK(done == 50);
}
