#include "bench/cpu_peaks.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <vector>

#include "core/tensor.h"
#include "cpu/thread_pool.h"
#include "ops/ops.h"

namespace seqtrans::bench {
namespace {

constexpr int kTrials = 5;

template <class Work>
double best_seconds(const Work& work) {
  double best = 1e30;
  for (int trial = 0; trial < kTrials; ++trial) {
    const auto start = std::chrono::steady_clock::now();
    work();
    best = std::min(best, std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count());
  }
  return best;
}

// [512, 1024] x [1024, 1024]: 1 GFLOP, large enough for BLAS's best blocking, small enough to time fast.
double gemm_flops_per_second() {
  const int64_t m = 512, k = 1024, n = 1024;
  Tensor a({m, k}, DataType::F32, Device::CPU), b({n, k}, DataType::F32, Device::CPU);
  std::fill(a.data<float>(), a.data<float>() + m * k, 0.5f);
  std::fill(b.data<float>(), b.data<float>() + n * k, 0.25f);
  ops::matmul(a, b);  // warm-up: threads awake, pages touched
  return 2.0 * m * n * k / best_seconds([&] { ops::matmul(a, b); });
}

// 128 MiB copied: well past any last-level cache.
double copy_bytes_per_second() {
  const size_t bytes = size_t{128} << 20;
  std::vector<char> source(bytes, 1), target(bytes, 0);
  const auto copy = [&] {
    cpu::parallel_for(static_cast<int64_t>(bytes >> 20), 1, [&](int64_t begin, int64_t end) {
      std::memcpy(target.data() + (begin << 20), source.data() + (begin << 20), static_cast<size_t>(end - begin) << 20);
    });
  };
  copy();
  return 2.0 * static_cast<double>(bytes) / best_seconds(copy);
}

}  // namespace

Hardware cpu_peaks() {
  static const Hardware measured{gemm_flops_per_second(), copy_bytes_per_second()};
  return measured;
}

}  // namespace seqtrans::bench
