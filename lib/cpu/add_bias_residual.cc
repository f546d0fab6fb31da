#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  const float* values = x.data<float>();
  const float* b = bias.data<float>();
  const float* r = residual.data<float>();
  float* result = out.data<float>();
  // Hugging Face's order: the projection with its bias first, then the residual.
  for (int64_t i = 0; i < rows * width; ++i) result[i] = r[i] + (values[i] + b[i % width]);
}

}  // namespace seqtrans::cpu
