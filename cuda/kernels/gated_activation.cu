// gated_activation (SwiGLU): out[r, c] = silu(gate_up[r, c]) * gate_up[r, f + c], one thread per vector of
// the output, each silu rounded to T before the product as Hugging Face's fp16 model rounds it.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

// row_vectors: vectors in f (an output row; an input row holds twice as many).
template <typename T, int N>
__global__ void gated_activation_kernel(const T* __restrict__ gate_up, T* __restrict__ out, int64_t vectors,
                                        int64_t row_vectors) {
  start_after_inputs();
  using V = Vector<T, N>;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vectors; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / row_vectors, c = i % row_vectors;
    const V* in = reinterpret_cast<const V*>(gate_up) + row * 2 * row_vectors;
    const V gate = in[c], up = in[row_vectors + c];
    V result;
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const float g = to_float(gate.value[e]);
      const T silu = from_float<T>(g / (1.0f + expf(-g)));
      result.value[e] = from_float<T>(to_float(silu) * to_float(up.value[e]));
    }
    reinterpret_cast<V*>(out)[i] = result;
  }
}

template <typename T>
void launch_gated_activation(const Tensor& gate_up, Tensor& out, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t count = out.elements(), width = out.dim(1);
  if (count == 0) return;
  if (width % kWidth == 0 && is_aligned(gate_up.raw(), 16) && is_aligned(out.raw(), 16)) {
    launch_kernel(gated_activation_kernel<T, kWidth>, grid_size(count / kWidth, kThreads), kThreads, 0, stream,
                  gate_up.data<T>(), out.data<T>(), count / kWidth, width / kWidth);
  } else {
    launch_kernel(gated_activation_kernel<T, 1>, grid_size(count, kThreads), kThreads, 0, stream, gate_up.data<T>(),
                  out.data<T>(), count, width);
  }
}

}  // namespace

void gated_activation(const Tensor& gate_up, Tensor& out, cudaStream_t stream) {
  check_on_device("gated_activation", "gate_up", gate_up);
  check_on_device("gated_activation", "out", out);
  check_same_dtype("gated_activation", "out", out, gate_up.dtype());
  if (gate_up.dtype() == DataType::F16)
    launch_gated_activation<__half>(gate_up, out, stream);
  else
    launch_gated_activation<float>(gate_up, out, stream);
}

}  // namespace seqtrans::cuda
