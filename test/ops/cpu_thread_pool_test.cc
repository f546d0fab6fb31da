// The CPU backend's thread pool: every part runs once, errors reach the caller, concurrent callers are
// safe, and the ops it splits give the same bits on any thread count.
#include <atomic>
#include <cstring>
#include <stdexcept>
#include <thread>
#include <vector>

#include "catch.h"
#include "cpu/thread_pool.h"
#include "ops/ops.h"
#include "ops/runtime.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::random_floats;
using seqtrans::testing::same_bits;

namespace {

// Restores the pool's size at the end of a test: later tests expect the one they set.
struct ThreadsGuard {
  int saved = cpu::threads();
  ~ThreadsGuard() { cpu::set_threads(saved); }
};

}  // namespace

TEST_CASE("parallel_for covers every index exactly once, whatever the threads and grain", "[ops][threads]") {
  ThreadsGuard guard;
  for (int threads : {1, 2, 3}) {
    cpu::set_threads(threads);
    for (int64_t count : {0, 1, 7, 100, 1001}) {
      for (int64_t grain : {1, 3, 64, 5000}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(count));
        cpu::parallel_for(count, grain, [&](int64_t begin, int64_t end) {
          CHECK(begin < end);
          for (int64_t i = begin; i < end; ++i) ++hits[static_cast<size_t>(i)];
        });
        int wrong = 0;
        for (auto& hit : hits) wrong += hit.load() != 1;
        INFO("threads " << threads << " count " << count << " grain " << grain);
        CHECK(wrong == 0);
      }
    }
  }
}

TEST_CASE("an error in any part reaches the caller, and the pool keeps working", "[ops][threads]") {
  ThreadsGuard guard;
  cpu::set_threads(2);
  for (int failing : {0, 3}) {
    const auto body = [&](int part) {
      if (part == failing) throw std::runtime_error("part failed");
    };
    CHECK_THROWS_AS(cpu::run_parts(4, cpu::PartTask(body)), std::runtime_error);
  }
  std::atomic<int> ran{0};
  const auto count = [&](int) { ++ran; };
  cpu::run_parts(8, cpu::PartTask(count));
  CHECK(ran.load() == 8);
}

TEST_CASE("two threads running parallel ops at once both finish every part", "[ops][threads]") {
  ThreadsGuard guard;
  cpu::set_threads(2);
  std::atomic<int64_t> totals[2] = {{0}, {0}};
  const auto caller = [&](int index) {
    for (int round = 0; round < 200; ++round)
      cpu::parallel_for(1000, 10, [&](int64_t begin, int64_t end) { totals[index] += end - begin; });
  };
  std::thread other(caller, 1);
  caller(0);
  other.join();
  CHECK(totals[0].load() == 200 * 1000);
  CHECK(totals[1].load() == 200 * 1000);
}

TEST_CASE("matmul with its epilogue and log_softmax_topk give the same bits on 1, 2 and 3 threads", "[ops][threads]") {
  ThreadsGuard guard;
  const Tensor a = random_floats({37, 256});
  const Tensor weight = random_floats({1000, 256});
  const Tensor bias = random_floats({1000});
  ops::MatmulOptions options;
  options.bias = &bias;
  options.activation = Activation::Swish;
  ops::TopkOptions topk;
  topk.k = 4;
  std::vector<Tensor> products, values, ids;
  for (int threads : {1, 2, 3}) {
    ops::set_cpu_threads(threads);
    products.push_back(ops::matmul(a, weight, options));
    Tensor top_values, top_ids;
    ops::log_softmax_topk(products.back(), topk, top_values, top_ids);
    values.push_back(top_values);
    ids.push_back(top_ids);
  }
  for (size_t i = 1; i < products.size(); ++i) {
    CHECK(same_bits(products[0], products[i]));
    CHECK(same_bits(values[0], values[i]));
    CHECK(same_bits(ids[0], ids[i]));
  }
}
