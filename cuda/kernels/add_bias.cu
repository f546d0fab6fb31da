// add_bias: x[i, :] += bias, in place.
#include "cuda/kernels/bias.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {

void add_bias(Tensor& x, const Tensor& bias, cudaStream_t stream) {
  check_on_device("add_bias", "x", x);
  check_on_device("add_bias", "bias", bias);
  check_same_dtype("add_bias", "bias", bias, x.dtype());
  if (x.dtype() == DataType::F16)
    launch_bias_activation<__half>(x, bias, Identity{}, stream);
  else
    launch_bias_activation<float>(x, bias, Identity{}, stream);
}

}  // namespace seqtrans::cuda
