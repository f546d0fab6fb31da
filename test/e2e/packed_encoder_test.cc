// The packed encoder (joining sentences concatenated, no padding tokens, attention per sentence through a
// key span) computes what the padded encoder computes at every real position, on the CPU and the GPU.
#include <algorithm>
#include <cmath>
#include <vector>

#include "catch.h"
#include "models/encoder_decoder_model.h"
#include "support/gpu.h"
#include "support/random_models.h"

using namespace seqtrans;

namespace {

ModelFile random_model() { return testing::small_random_model(3, 1, 5); }

// Sources of 1 to 23 ids, EOS (0) last, in an order that is not sorted by length.
std::vector<std::vector<int32_t>> sources() {
  std::vector<std::vector<int32_t>> all;
  for (const int length : {7, 1, 23, 4, 12, 2, 9}) {
    std::vector<int32_t> source;
    for (int t = 0; t + 1 < length; ++t) source.push_back(1 + (length * 5 + t * 3) % 37);
    source.push_back(0);
    all.push_back(source);
  }
  return all;
}

// Largest |packed - padded| over the real positions: packed [n, d] holds the sentences' tokens one after
// another, padded [b, t, d] each sentence in its row.
double worst_difference(const Tensor& packed, const Tensor& padded, const std::vector<std::vector<int32_t>>& all) {
  size_t tokens = 0;
  for (const auto& source : all) tokens += source.size();
  REQUIRE(packed.rank() == 2);
  REQUIRE(packed.dim(0) == static_cast<int64_t>(tokens));
  REQUIRE(packed.dim(1) == padded.dim(2));
  const std::vector<float> a = packed.to(Device::CPU).to(DataType::F32).to_float_vector();
  const std::vector<float> b = padded.to(Device::CPU).to(DataType::F32).to_float_vector();
  const size_t time = static_cast<size_t>(padded.dim(1)), width = static_cast<size_t>(padded.dim(2));
  double worst = 0.0;
  size_t token = 0;
  for (size_t s = 0; s < all.size(); ++s)
    for (size_t t = 0; t < all[s].size(); ++t, ++token)
      for (size_t c = 0; c < width; ++c)
        worst = std::max(worst, std::abs(static_cast<double>(a[token * width + c]) - b[(s * time + t) * width + c]));
  return worst;
}

}  // namespace

TEST_CASE("packed encoder equals the padded encoder at every real position (CPU)", "[e2e][encoder]") {
  const ModelFile file = random_model();
  const EncoderDecoderModel model(file, ModelOptions{});
  const auto all = sources();
  Tensor lengths;
  const Tensor padded = model.encode_tensor(all, lengths);
  const Tensor packed = model.encode_packed(all);
  CHECK(padded.dim(1) == 23);
  CHECK(worst_difference(packed, padded, all) < 1e-5);
}

TEST_CASE("packed encoder on the GPU equals the padded encoder on the CPU", "[gpu][e2e][encoder]") {
  REQUIRE_GPU_OR_SKIP();
  const ModelFile file = random_model();
  const EncoderDecoderModel cpu(file, ModelOptions{});
  const auto all = sources();
  Tensor lengths;
  const Tensor expected = cpu.encode_tensor(all, lengths);
  for (const DataType dtype : {DataType::F32, DataType::F16}) {
    CAPTURE(dtype_name(dtype));
    const EncoderDecoderModel gpu(file, ModelOptions{Device::CUDA, dtype});
    CHECK(worst_difference(gpu.encode_packed(all), expected, all) < (dtype == DataType::F16 ? 5e-2 : 1e-4));
  }
}
