// kv_cache_write: cache[s, positions[s], :] = values[s, :] for every slot, one launch.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

template <typename T, int N>
__global__ void kv_cache_write_kernel(T* __restrict__ cache, const T* __restrict__ values,
                                      const int32_t* __restrict__ positions, int64_t vectors, int64_t row_vectors,
                                      int64_t capacity) {
  using V = Vector<T, N>;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vectors; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t slot = i / row_vectors, column = i % row_vectors;
    const int32_t position = positions[slot];
    if (position < 0 || position >= capacity) continue;
    reinterpret_cast<V*>(cache)[(slot * capacity + position) * row_vectors + column] =
        reinterpret_cast<const V*>(values)[i];
  }
}

template <typename T>
void launch_kv_cache_write(Tensor& cache, const Tensor& values, const Tensor& positions, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t count = values.elements(), width = cache.dim(2), capacity = cache.dim(1);
  if (count == 0) return;
  if (width % kWidth == 0 && is_aligned(cache.raw(), 16) && is_aligned(values.raw(), 16)) {
    kv_cache_write_kernel<T, kWidth><<<grid_size(count / kWidth, kThreads), kThreads, 0, stream>>>(
        cache.data<T>(), values.data<T>(), positions.data<int32_t>(), count / kWidth, width / kWidth, capacity);
  } else {
    kv_cache_write_kernel<T, 1><<<grid_size(count, kThreads), kThreads, 0, stream>>>(
        cache.data<T>(), values.data<T>(), positions.data<int32_t>(), count, width, capacity);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void kv_cache_write(Tensor& cache, const Tensor& values, const Tensor& positions, cudaStream_t stream) {
  const char* op = "kv_cache_write";
  check_on_device(op, "cache", cache);
  check_on_device(op, "values", values);
  check_on_device(op, "positions", positions);
  switch (cache.dtype()) {
    case DataType::F16: launch_kv_cache_write<__half>(cache, values, positions, stream); break;
    case DataType::F32: launch_kv_cache_write<float>(cache, values, positions, stream); break;
    case DataType::I32: throw Error("kv_cache_write: the cache must be fp32 or fp16");
  }
}

}  // namespace seqtrans::cuda
