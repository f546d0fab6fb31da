// The output layer on the GPU in fp16 with a vocabulary that is not a multiple of 8, where OutputHead pads its
// product to one (cuBLAS's Hopper kernels want it): the k best and the draws are the CPU's, never a padded id,
// with and without a bias, and weight() keeps the model's V rows.
#include <cmath>
#include <vector>

#include "catch.h"
#include "models/output_head.h"
#include "support/gpu.h"

#ifdef SEQTRANS_WITH_CUDA
#include "support/gpu_operands.h"

using namespace seqtrans;
using namespace seqtrans::testing;

TEST_CASE("output head with a vocabulary not a multiple of 8: the GPU selects and draws as the CPU does",
          "[gpu][output]") {
  REQUIRE_GPU_OR_SKIP();
  constexpr int64_t kVocab = 37, kWidth = 64, kRows = 64, kBest = 8;
  for (const bool with_bias : {false, true}) {
    CAPTURE(with_bias);
    const Operand weight = random_operand({kVocab, kWidth}, DataType::F16);
    const Operand x = random_operand({kRows, kWidth}, DataType::F16, -2.0f, 2.0f);
    const Tensor bias = random_floats({kVocab});
    const OutputHead cpu(weight.cpu, with_bias ? bias : Tensor(), ops::TopkAlgorithm::Auto);
    const OutputHead gpu(weight.gpu, with_bias ? bias.to(Device::CUDA) : Tensor(), ops::TopkAlgorithm::Auto);
    CHECK(gpu.weight().shape() == Shape{kVocab, kWidth});
    SuppressedLists suppressed_cpu, suppressed_gpu;
    suppressed_cpu.select({3}, kVocab, Device::CPU);
    suppressed_gpu.select({3}, kVocab, Device::CUDA);

    Tensor values_cpu, ids_cpu, values_gpu, ids_gpu;
    cpu.select(x.cpu, OutputSelection{kBest, &suppressed_cpu}, values_cpu, ids_cpu);
    gpu.select(x.gpu, OutputSelection{kBest, &suppressed_gpu}, values_gpu, ids_gpu);
    const std::vector<int32_t> best_cpu = ids_cpu.to_int_vector(), best_gpu = ints_of(ids_gpu);
    const std::vector<float> log_probs_cpu = values_cpu.to_float_vector(), log_probs_gpu = values_of(values_gpu);
    REQUIRE(best_gpu.size() == static_cast<size_t>(kRows * kBest));
    for (size_t i = 0; i < best_gpu.size(); ++i) {
      CAPTURE(i);
      CHECK(best_gpu[i] == best_cpu[i]);
      CHECK(std::abs(log_probs_gpu[i] - log_probs_cpu[i]) < 1e-3f);
    }

    // Draws at a high temperature reach every id; none is padded, and they are the CPU's.
    std::vector<ops::SamplingRow> settings(static_cast<size_t>(kRows));
    for (size_t r = 0; r < settings.size(); ++r) {
      settings[r].temperature = 20.0f;
      settings[r].seed_low = 7;
      settings[r].line_low = static_cast<uint32_t>(r);
    }
    const Tensor rows = ops::sampling_rows_tensor(settings);
    const Tensor rows_gpu = rows.to(Device::CUDA);
    Tensor drawn_cpu, drawn_log_probs_cpu, drawn_gpu, drawn_log_probs_gpu;
    cpu.select(x.cpu, OutputSelection{kSampled, &suppressed_cpu, nullptr, &rows}, drawn_log_probs_cpu, drawn_cpu);
    gpu.select(x.gpu, OutputSelection{kSampled, &suppressed_gpu, nullptr, &rows_gpu}, drawn_log_probs_gpu, drawn_gpu);
    const std::vector<int32_t> draws_cpu = drawn_cpu.to_int_vector(), draws_gpu = ints_of(drawn_gpu);
    int same = 0;
    for (size_t r = 0; r < draws_gpu.size(); ++r) {
      CHECK(draws_gpu[r] >= 0);
      CHECK(draws_gpu[r] < kVocab);
      same += draws_gpu[r] == draws_cpu[r];
    }
    CHECK(same >= kRows - 2);  // a draw may fall the other side of a boundary the roundings move
  }
}

#endif  // SEQTRANS_WITH_CUDA
