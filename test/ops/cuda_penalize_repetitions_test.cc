// HF's repetition controls on the GPU against the CPU op, on fresh random rows and histories (repeated
// ids and repeated n-grams included), with and without bias and normalization.
#include "catch.h"

#ifdef SEQTRANS_WITH_CUDA

#include <cmath>
#include <limits>
#include <random>

#include "core/device.h"
#include "ops/ops.h"
#include "support/gpu.h"
#include "support/random_tensor.h"

using namespace seqtrans;
using seqtrans::testing::test_rng;

namespace {

struct RepetitionCase {
  int64_t rows, vocab, capacity;
  float penalty;
  int ngram;
  bool bias;
  bool normalize;
};

void check_case(const RepetitionCase& c) {
  CAPTURE(c.rows, c.vocab, c.capacity, c.penalty, c.ngram, c.bias, c.normalize);
  const Tensor logits = testing::random_floats({c.rows, c.vocab}, -6.0f, 6.0f);
  std::uniform_int_distribution<int32_t> small_id(0, 7), any_id(0, static_cast<int32_t>(c.vocab - 1));
  std::uniform_int_distribution<int32_t> length(0, static_cast<int32_t>(c.capacity));
  std::vector<int32_t> history(static_cast<size_t>(c.rows * c.capacity)), lengths;
  for (int64_t r = 0; r < c.rows; ++r) {
    // Few distinct ids, so that ids and n-grams repeat.
    for (int64_t j = 0; j < c.capacity; ++j) history[r * c.capacity + j] = r % 2 == 0 ? small_id(test_rng()) : any_id(test_rng());
    lengths.push_back(length(test_rng()));
  }
  const Tensor history_tensor = Tensor::from_ints({c.rows, c.capacity}, history);
  const Tensor lengths_tensor = Tensor::from_ints({c.rows}, lengths);
  const Tensor bias = testing::random_floats({c.vocab}, -1.0f, 1.0f);

  ops::RepetitionOptions options;
  options.penalty = c.penalty;
  options.no_repeat_ngram = c.ngram;
  options.normalize = c.normalize;
  options.bias = c.bias ? &bias : nullptr;
  Tensor host = logits.to(Device::CPU).to(DataType::F32);
  host = Tensor::from_floats(logits.shape(), logits.to_float_vector());  // a copy: the op works in place
  ops::penalize_repetitions(host, history_tensor, lengths_tensor, options);

  const Tensor device_bias = bias.to(Device::CUDA);
  options.bias = c.bias ? &device_bias : nullptr;
  Tensor device = logits.to(Device::CUDA);
  ops::penalize_repetitions(device, history_tensor.to(Device::CUDA), lengths_tensor.to(Device::CUDA), options);

  const std::vector<float> want = host.to_float_vector(), got = device.to_float_vector();
  REQUIRE(got.size() == want.size());
  for (size_t i = 0; i < want.size(); ++i) {
    CAPTURE(i);
    if (std::isinf(want[i])) {
      REQUIRE(got[i] == want[i]);
    } else {
      REQUIRE(std::abs(got[i] - want[i]) <= 1e-5f * std::max(1.0f, std::abs(want[i])));
    }
  }
}

}  // namespace

TEST_CASE("cuda penalize_repetitions matches the CPU", "[gpu][repetition]") {
  REQUIRE_GPU_OR_SKIP();
  for (const float penalty : {1.0f, 1.3f, 0.6f})
    for (const int ngram : {0, 1, 2, 3})
      for (const bool normalize : {false, true}) {
        check_case({16, 50, 24, penalty, ngram, /*bias=*/true, normalize});
        check_case({5, 58101, 300, penalty, ngram, /*bias=*/false, normalize});
      }
}

#endif  // SEQTRANS_WITH_CUDA
