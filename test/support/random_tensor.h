// Fresh random inputs for op tests (a new seed per call, so every run checks different values).
#pragma once

#include <cstdint>
#include <cstring>
#include <limits>
#include <random>
#include <vector>

#include "core/tensor.h"

namespace seqtrans::testing {

inline std::mt19937& test_rng() {
  static std::mt19937 rng(std::random_device{}());
  return rng;
}

inline Tensor random_floats(const Shape& shape, float low = -1.0f, float high = 1.0f) {
  std::uniform_real_distribution<float> uniform(low, high);
  std::vector<float> values(static_cast<size_t>(shape_elements(shape)));
  for (float& value : values) value = uniform(test_rng());
  return Tensor::from_floats(shape, values);
}

inline Tensor random_ints(const Shape& shape, int32_t low, int32_t high) {
  std::uniform_int_distribution<int32_t> uniform(low, high);
  std::vector<int32_t> values(static_cast<size_t>(shape_elements(shape)));
  for (int32_t& value : values) value = uniform(test_rng());
  return Tensor::from_ints(shape, values);
}

// Largest |a - b| / max(1, |b|) over all elements.
inline double max_relative_error(const std::vector<float>& a, const std::vector<float>& b) {
  double worst = 0.0;
  for (size_t i = 0; i < a.size() && i < b.size(); ++i) {
    const double scale = std::max(1.0, static_cast<double>(std::abs(b[i])));
    worst = std::max(worst, std::abs(static_cast<double>(a[i]) - b[i]) / scale);
  }
  return a.size() == b.size() ? worst : 1e30;
}

// Whether two host tensors hold the same shape and the same bytes (fp32 or fp16: bit for bit, -0 and NaNs too).
inline bool same_bits(const Tensor& a, const Tensor& b) {
  return a.shape() == b.shape() && a.dtype() == b.dtype() && std::memcmp(a.raw(), b.raw(), a.bytes()) == 0;
}

// Random keys or values [rows, block, width] with NaN wherever no query reads (read[r * block + j] false): a
// kernel reading past a length, from the wrong row or from the wrong kv head shows NaN in its result.
inline Tensor poisoned_floats(int64_t rows, int64_t block, int64_t width, const std::vector<bool>& read) {
  Tensor x = random_floats({rows, block, width});
  for (int64_t key = 0; key < rows * block; ++key)
    if (!read[static_cast<size_t>(key)])
      for (int64_t c = 0; c < width; ++c) x.data<float>()[key * width + c] = std::numeric_limits<float>::quiet_NaN();
  return x;
}

}  // namespace seqtrans::testing
