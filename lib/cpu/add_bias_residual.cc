#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void add_bias_residual_rows(const Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out, int64_t begin,
                            int64_t end) {
  const int64_t width = x.dim(1);
  const float* values = x.data<float>();
  const float* b = bias.data<float>();
  const float* r = residual.data<float>();
  float* result = out.data<float>();
  // Hugging Face's order: the projection with its bias first, then the residual.
  for (int64_t at = begin * width; at < end * width; at += width)
    for (int64_t c = 0; c < width; ++c) result[at + c] = r[at + c] + (values[at + c] + b[c]);
}

void add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out) {
  add_bias_residual_rows(x, bias, residual, out, 0, x.dim(0));
}

}  // namespace seqtrans::cpu
