// convert: fp32 <-> fp16, element-wise, 16-byte stores where aligned.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

template <typename In, typename Out, int N>
__global__ void convert_kernel(const In* __restrict__ in, Out* __restrict__ out, int64_t vectors) {
  start_after_inputs();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vectors; i += int64_t{gridDim.x} * blockDim.x) {
    const Vector<In, N> source = reinterpret_cast<const Vector<In, N>*>(in)[i];
    Vector<Out, N> result;
#pragma unroll
    for (int j = 0; j < N; ++j) result.value[j] = from_float<Out>(to_float(source.value[j]));
    reinterpret_cast<Vector<Out, N>*>(out)[i] = result;
  }
}

template <typename In, typename Out>
void launch_convert(const Tensor& x, Tensor& out, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t count = x.elements();
  const In* in = x.data<In>();
  Out* result = out.data<Out>();
  constexpr int kWidth = 8;
  const bool vectorized = count % kWidth == 0 && is_aligned(in, sizeof(In) * kWidth) &&
                          is_aligned(result, sizeof(Out) * kWidth);
  if (vectorized) {
    launch_kernel(convert_kernel<In, Out, kWidth>, grid_size(count / kWidth, kThreads), kThreads, 0, stream, in, result,
                  count / kWidth);
  } else {
    launch_kernel(convert_kernel<In, Out, 1>, grid_size(count, kThreads), kThreads, 0, stream, in, result, count);
  }
}

}  // namespace

void convert(const Tensor& x, Tensor& out, cudaStream_t stream) {
  check_on_device("convert", "x", x);
  check_on_device("convert", "out", out);
  SEQTRANS_CHECK(x.elements() == out.elements(), "convert: {} elements into {}", x.elements(), out.elements());
  if (x.elements() == 0) return;
  if (x.dtype() == out.dtype()) {
    CUDA_CHECK(cudaMemcpyAsync(out.raw(), x.raw(), x.bytes(), cudaMemcpyDeviceToDevice, stream));
  } else if (x.dtype() == DataType::F32 && out.dtype() == DataType::F16) {
    launch_convert<float, __half>(x, out, stream);
  } else if (x.dtype() == DataType::F16 && out.dtype() == DataType::F32) {
    launch_convert<__half, float>(x, out, stream);
  } else {
    throw Error(fmt::format("convert: no conversion from {} to {}", dtype_name(x.dtype()), dtype_name(out.dtype())));
  }
}

}  // namespace seqtrans::cuda
