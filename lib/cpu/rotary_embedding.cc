#include <cmath>
#include <vector>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void rotary_table(float theta, Tensor& out) {
  // Hugging Face: inv_freq = 1.0 / (theta ** (arange(0, dim, 2, int64).float() / dim)), freqs = inv_freq *
  // position, all fp32 tensors. The exponent, the reciprocal and the angle are the same fp32 operations here;
  // pow, cos and sin (torch's fp32 functions, within about an ulp) are evaluated in double and rounded to the
  // nearest float, which is what they approximate.
  const int64_t positions = out.dim(0), head_dim = out.dim(1), half = head_dim / 2;
  std::vector<float> inverse_frequency(static_cast<size_t>(half));
  for (int64_t i = 0; i < half; ++i) {
    const float exponent = static_cast<float>(2 * i) / static_cast<float>(head_dim);
    const float power = static_cast<float>(std::pow(static_cast<double>(theta), static_cast<double>(exponent)));
    inverse_frequency[i] = 1.0f / power;
  }
  float* values = out.data<float>();
  for (int64_t p = 0; p < positions; ++p) {
    float* row = values + p * head_dim;
    for (int64_t i = 0; i < half; ++i) {
      const double angle = static_cast<float>(p) * inverse_frequency[i];  // the fp32 product, then widened
      row[i] = static_cast<float>(std::cos(angle));
      row[half + i] = static_cast<float>(std::sin(angle));
    }
  }
}

void apply_rotary_embedding(Tensor& qkv, const Tensor& positions, const Tensor& table, const ops::RotaryShape& shape) {
  const int64_t tokens = qkv.dim(0), width = qkv.dim(1), head_dim = table.dim(1), half = head_dim / 2;
  const int64_t rotated_heads = int64_t{shape.num_heads} + shape.num_kv_heads;  // the queries', then the keys'
  const int32_t* position = positions.data<int32_t>();
  for (int64_t t = 0; t < tokens; ++t)
    SEQTRANS_CHECK(position[t] >= 0 && position[t] < table.dim(0),
                   "apply_rotary_embedding: token {} position {} outside the table's {}", t, position[t],
                   table.dim(0));
  float* values = qkv.data<float>();
  for (int64_t t = 0; t < tokens; ++t) {
    const float* cos = table.data<float>() + position[t] * head_dim;
    const float* sin = cos + half;
    for (int64_t head = 0; head < rotated_heads; ++head) {
      float* x = values + t * width + head * head_dim;
      for (int64_t i = 0; i < half; ++i) {
        const float x1 = x[i], x2 = x[half + i];
        x[i] = x1 * cos[i] - x2 * sin[i];
        x[half + i] = x2 * cos[i] + x1 * sin[i];
      }
    }
  }
}

}  // namespace seqtrans::cpu
