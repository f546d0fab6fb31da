#include <cmath>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {
namespace {

float activate(float x, Activation activation) {
  switch (activation) {
    case Activation::Relu: return x > 0.0f ? x : 0.0f;
    case Activation::Gelu: return 0.5f * x * (1.0f + std::erf(x * 0.70710678118654752f));
    case Activation::GeluTanh: {
      const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
      return 0.5f * x * (1.0f + std::tanh(inner));
    }
    case Activation::Swish: return x / (1.0f + std::exp(-x));
  }
  return x;
}

}  // namespace

void bias_activation_columns(float* x, int64_t rows, int64_t stride, int64_t begin, int64_t end, const float* bias,
                             Activation activation) {
  for (int64_t row = 0; row < rows; ++row) {
    float* values = x + row * stride;
    for (int64_t col = begin; col < end; ++col) values[col] = activate(values[col] + bias[col], activation);
  }
}

void bias_activation(Tensor& x, const Tensor& bias, Activation activation) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  bias_activation_columns(x.data<float>(), rows, width, 0, width, bias.data<float>(), activation);
}

}  // namespace seqtrans::cpu
