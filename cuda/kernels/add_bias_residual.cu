// add_bias_residual: out = residual + (x + bias), the end of a pre-norm sublayer.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

template <typename T, int N>
__global__ void add_bias_residual_kernel(const T* __restrict__ x, const T* __restrict__ bias,
                                         const T* __restrict__ residual, T* __restrict__ out, int64_t vectors,
                                         int64_t row_vectors) {
  start_after_inputs();
  using V = Vector<T, N>;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vectors; i += int64_t{gridDim.x} * blockDim.x) {
    const V value = reinterpret_cast<const V*>(x)[i];
    const V shift = reinterpret_cast<const V*>(bias)[i % row_vectors];
    const V skip = reinterpret_cast<const V*>(residual)[i];
    V sum;
#pragma unroll
    for (int j = 0; j < N; ++j)
      sum.value[j] = add_bias_residual_element(value.value[j], shift.value[j], skip.value[j]);
    reinterpret_cast<V*>(out)[i] = sum;
  }
}

template <typename T>
void launch_add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out,
                              cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t count = x.elements(), width = x.dim(1);
  if (count == 0) return;
  const bool aligned = is_aligned(x.raw(), 16) && is_aligned(bias.raw(), 16) && is_aligned(residual.raw(), 16) &&
                       is_aligned(out.raw(), 16);
  if (width % kWidth == 0 && aligned)
    launch_kernel(add_bias_residual_kernel<T, kWidth>, grid_size(count / kWidth, kThreads), kThreads, 0, stream,
                  x.data<T>(), bias.data<T>(), residual.data<T>(), out.data<T>(), count / kWidth, width / kWidth);
  else
    launch_kernel(add_bias_residual_kernel<T, 1>, grid_size(count, kThreads), kThreads, 0, stream, x.data<T>(),
                  bias.data<T>(), residual.data<T>(), out.data<T>(), count, width);
}

}  // namespace

void add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual, Tensor& out, cudaStream_t stream) {
  const char* op = "add_bias_residual";
  check_on_device(op, "x", x);
  check_on_device(op, "bias", bias);
  check_on_device(op, "residual", residual);
  check_same_dtype(op, "bias", bias, x.dtype());
  check_same_dtype(op, "residual", residual, x.dtype());
  if (x.dtype() == DataType::F16)
    launch_add_bias_residual<__half>(x, bias, residual, out, stream);
  else
    launch_add_bias_residual<float>(x, bias, residual, out, stream);
}

}  // namespace seqtrans::cuda
