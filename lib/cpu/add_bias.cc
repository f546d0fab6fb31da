#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void add_bias(Tensor& x, const Tensor& bias) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  float* values = x.data<float>();
  const float* b = bias.data<float>();
  for (int64_t row = 0; row < rows; ++row)
    for (int64_t col = 0; col < width; ++col) values[row * width + col] += b[col];
}

}  // namespace seqtrans::cpu
