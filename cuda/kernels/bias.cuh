// The row-broadcast kernel shared by add_bias and bias_activation: x[i, :] = f(x[i, :] + bias).
#pragma once

#include "cuda/kernels/common.cuh"

namespace seqtrans::cuda {

struct Identity {
  __device__ __forceinline__ float operator()(float x) const { return x; }
};

template <typename T, int N, typename Function>
__global__ void bias_activation_kernel(T* __restrict__ x, const T* __restrict__ bias, int64_t vectors,
                                       int64_t row_vectors, Function function) {
  start_after_inputs();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vectors; i += int64_t{gridDim.x} * blockDim.x) {
    Vector<T, N> values = reinterpret_cast<Vector<T, N>*>(x)[i];
    const Vector<T, N> shift = reinterpret_cast<const Vector<T, N>*>(bias)[i % row_vectors];
#pragma unroll
    for (int j = 0; j < N; ++j)
      values.value[j] = from_float<T>(function(to_float(values.value[j]) + to_float(shift.value[j])));
    reinterpret_cast<Vector<T, N>*>(x)[i] = values;
  }
}

// Launches the kernel with 16-byte vectors where the width and the pointers allow it.
template <typename T, typename Function>
void launch_bias_activation(Tensor& x, const Tensor& bias, Function function, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t count = x.elements(), width = x.dim(1);
  if (count == 0) return;
  T* values = x.data<T>();
  const T* shift = bias.data<T>();
  if (width % kWidth == 0 && is_aligned(values, 16) && is_aligned(shift, 16)) {
    launch_kernel(bias_activation_kernel<T, kWidth, Function>, grid_size(count / kWidth, kThreads), kThreads, 0, stream,
                  values, shift, count / kWidth, width / kWidth, function);
  } else {
    launch_kernel(bias_activation_kernel<T, 1, Function>, grid_size(count, kThreads), kThreads, 0, stream, values,
                  shift, count, width, function);
  }
}

}  // namespace seqtrans::cuda
