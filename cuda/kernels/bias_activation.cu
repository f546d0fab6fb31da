// bias_activation: x = activation(x + bias), in place; formulas as in lib/cpu/bias_activation.cc.
#include "cuda/kernels/bias.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

struct Relu {
  __device__ __forceinline__ float operator()(float x) const { return x > 0.0f ? x : 0.0f; }
};
struct Gelu {
  __device__ __forceinline__ float operator()(float x) const { return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f)); }
};
struct GeluTanh {
  __device__ __forceinline__ float operator()(float x) const {
    const float inner = 0.79788456080286536f * (x + 0.044715f * x * x * x);
    return 0.5f * x * (1.0f + tanhf(inner));
  }
};
struct Swish {
  __device__ __forceinline__ float operator()(float x) const { return x / (1.0f + expf(-x)); }
};

template <typename T>
void dispatch_activation(Tensor& x, const Tensor& bias, Activation activation, cudaStream_t stream) {
  switch (activation) {
    case Activation::Relu: launch_bias_activation<T>(x, bias, Relu{}, stream); return;
    case Activation::Gelu: launch_bias_activation<T>(x, bias, Gelu{}, stream); return;
    case Activation::GeluTanh: launch_bias_activation<T>(x, bias, GeluTanh{}, stream); return;
    case Activation::Swish: launch_bias_activation<T>(x, bias, Swish{}, stream); return;
  }
  throw Error("bias_activation: unknown activation");
}

}  // namespace

void bias_activation(Tensor& x, const Tensor& bias, Activation activation, cudaStream_t stream) {
  check_on_device("bias_activation", "x", x);
  check_on_device("bias_activation", "bias", bias);
  check_same_dtype("bias_activation", "bias", bias, x.dtype());
  if (x.dtype() == DataType::F16)
    dispatch_activation<__half>(x, bias, activation, stream);
  else
    dispatch_activation<float>(x, bias, activation, stream);
}

}  // namespace seqtrans::cuda
