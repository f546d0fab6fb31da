#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void add_bias_columns(float* x, int64_t rows, int64_t stride, int64_t begin, int64_t end, const float* bias) {
  for (int64_t row = 0; row < rows; ++row) {
    float* values = x + row * stride;
    for (int64_t col = begin; col < end; ++col) values[col] += bias[col];
  }
}

void add_bias(Tensor& x, const Tensor& bias) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  add_bias_columns(x.data<float>(), rows, width, 0, width, bias.data<float>());
}

}  // namespace seqtrans::cpu
