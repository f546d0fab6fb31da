// Micro-benchmarks of the CPU kernels at the bundled model's decoder shapes (beam 4 x 64 sentences = 256
// rows, width 256, 8 heads, 38 source tokens, vocabulary 8,000), each variant against the one it replaces in
// the same process, interleaved round by round: on a shared machine only such pairs mean anything.
// Hidden, and a no-op unless SEQTRANS_CPU_BENCH is set:
//   SEQTRANS_CPU_BENCH=1 build/test/seqtrans_ops_tests "[cpu_bench]"
#include <algorithm>
#include <array>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <functional>
#include <numeric>
#include <string>
#include <vector>

#include "catch.h"
#include "cpu/attention_rows.h"
#include "cpu/cpu_ops.h"
#include "cpu/isa.h"
#include "cpu/packed_gemm.h"
#include "cpu/thread_pool.h"
#include "cpu/vector_math.h"
#include "ops/ops.h"
#include "support/random_tensor.h"

using namespace seqtrans;

namespace {

bool enabled() { return std::getenv("SEQTRANS_CPU_BENCH") != nullptr; }

double seconds_now() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

// Best time of one call of `body` in microseconds over a round of ~20 ms (the least disturbed one).
double best_microseconds(const std::function<void()>& body) {
  body();
  double best = 1e30;
  const double start = seconds_now();
  do {
    const double t0 = seconds_now();
    body();
    best = std::min(best, seconds_now() - t0);
  } while (seconds_now() - start < 0.02);
  return best * 1e6;
}

// Variants timed round-robin for `rounds` rounds; prints each one's best and its speed against the first.
void compare(const std::string& what, const std::vector<std::pair<std::string, std::function<void()>>>& variants,
             int rounds = 5) {
  std::vector<double> best(variants.size(), 1e30);
  for (int round = 0; round < rounds; ++round)
    for (size_t v = 0; v < variants.size(); ++v) best[v] = std::min(best[v], best_microseconds(variants[v].second));
  for (size_t v = 0; v < variants.size(); ++v)
    std::printf("%-44s %-28s %10.1f us  %5.2fx\n", what.c_str(), variants[v].first.c_str(), best[v], best[0] / best[v]);
  std::fflush(stdout);
}

}  // namespace

TEST_CASE("CPU kernels at the decoder's shapes", "[.][cpu_bench]") {
  if (!enabled()) return;
  const int threads = std::getenv("SEQTRANS_CPU_BENCH_THREADS") ? std::atoi(std::getenv("SEQTRANS_CPU_BENCH_THREADS")) : 1;
  cpu::set_threads(threads);
  std::printf("threads: %d\n", threads);

  // Products at the decoder's shapes: OpenBLAS on the stored weight against the packed kernels.
  for (const auto& [m, n, k] : std::vector<std::array<int64_t, 3>>{
           {256, 768, 256}, {256, 1024, 256}, {256, 256, 1024}, {256, 8000, 256}, {64, 8000, 256}, {64, 1024, 256},
           {16, 768, 256}, {4, 8000, 256}, {4, 768, 256}}) {
    const Tensor a = testing::random_floats({m, k}), w = testing::random_floats({n, k});
    const auto packed = ops::prepare_weight(w, ops::WeightFormat::Packed);
    const auto int8 = ops::prepare_weight(w, ops::WeightFormat::Int8);
    ops::MatmulOptions plain, prepared, quantized;
    prepared.prepared_b = packed.get();
    quantized.prepared_b = int8.get();
    compare("matmul " + std::to_string(m) + " x " + std::to_string(n) + " x " + std::to_string(k),
            {{"openblas", [&] { ops::matmul(a, w, plain); }},
             {"packed fp32", [&] { ops::matmul(a, w, prepared); }},
             {std::string("int8 ") + (cpu::int8_kernel() == cpu::Int8Kernel::Avx512Vnni ? "vnni" : "avx2"),
              [&] { ops::matmul(a, w, quantized); }}});
  }

  // Attention, one thread's rows: cross-attention (38 keys) and a self-attention step (16 keys).
  // Named copies rather than structured bindings, which the lambdas below could not capture before C++20.
  for (const std::array<int64_t, 3>& shape : std::vector<std::array<int64_t, 3>>{{38, 8, 32}, {16, 8, 32}, {38, 4, 64}}) {
    const int64_t key_len = shape[0], heads = shape[1], head_dim = shape[2];
    const int64_t rows = 256, width = heads * head_dim;
    const Tensor query = testing::random_floats({rows, width}), keys = testing::random_floats({64 * key_len, width});
    const Tensor values = testing::random_floats({64 * key_len, width});
    std::vector<float> out(static_cast<size_t>(rows * width)), scores(static_cast<size_t>(heads * key_len));
    std::vector<int64_t> key_offsets(static_cast<size_t>(key_len)), kv_offsets(static_cast<size_t>(heads));
    for (int64_t h = 0; h < heads; ++h) kv_offsets[h] = h * head_dim;
    const auto run = [&](bool avx2, bool approximate = false) {
      cpu::AttentionRow row;
      row.query = query.data<float>();
      row.keys = keys.data<float>();
      row.values = values.data<float>();
      row.key_offsets = key_offsets.data();
      row.kv_offsets = kv_offsets.data();
      row.out = out.data();
      row.query_len = 1;
      row.key_len = key_len;
      row.heads = heads;
      row.head_dim = head_dim;
      row.approximate_exp = approximate;
      row.isa = cpu::cpu_isa();
      for (int64_t b = 0; b < rows; ++b) {
        row.b = b;
        for (int64_t j = 0; j < key_len; ++j) key_offsets[j] = ((b / 4) * key_len + j) * width;  // beams share
        avx2 ? cpu::attend_row_avx2(row, scores.data()) : cpu::attend_row_portable(row, scores.data());
      }
    };
    compare("attention 256 rows x " + std::to_string(key_len) + " keys, d 256, " + std::to_string(heads) + " heads",
            {{"portable", [&] { run(false); }},
             {"avx2", [&] { run(true); }},
             {"avx2, approximate exp (int8)", [&] { run(true, true); }}});
  }

  // The output layer's normalizer: one row's exp-sum in each build the CPU runs.
  {
    const Tensor row = testing::random_floats({8000}, -20.0f, 0.0f);
    std::vector<std::pair<std::string, std::function<void()>>> builds;
    for (cpu::Isa isa : {cpu::Isa::Portable, cpu::Isa::Avx2, cpu::Isa::Avx512})
      if (static_cast<int>(isa) <= static_cast<int>(cpu::cpu_isa()))
        builds.emplace_back(cpu::isa_name(isa), [&row, isa] {
          volatile double sink = cpu::exp_sum(row.data<float>(), 8000, 0.0f, isa);
          (void)sink;
        });
    compare("exp_sum of 8,000 logits", builds);
  }

  // The output layer's selection (log_softmax_topk, beam 4: k = 4) over 256 rows.
  {
    const Tensor logits = testing::random_floats({256, 8000}, -12.0f, 8.0f), bias = testing::random_floats({8000});
    const Tensor suppressed = Tensor::from_ints({1}, {7999});
    ops::TopkOptions options;
    options.k = 4;
    options.bias = &bias;
    options.suppressed_ids = &suppressed;
    Tensor values({256, 4}, DataType::F32), ids({256, 4}, DataType::I32);
    compare("log_softmax_topk 256 x 8,000, k 4", {{"cpu", [&] { cpu::log_softmax_topk(logits, options, values, ids); }}});
  }
}
