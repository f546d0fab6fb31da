#include "cuda/kernels/common.cuh"
#include "cuda/kernels/suppression.cuh"
#include "cuda/kernels/cuda_ops.h"

#include <algorithm>
#include <climits>

namespace seqtrans::cuda {
namespace {

__global__ void suppression_bitmap_kernel(const int32_t* __restrict__ ids, int64_t count, int vocab,
                                          uint32_t* __restrict__ bitmap) {
  start_after_inputs();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count; i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t id = ids[i];
    if (id >= 0 && id < vocab) atomicOr(&bitmap[id >> 5], 1u << (id & 31));
  }
}

}  // namespace

Tensor suppression_bitmap(const char* op, const Tensor* ids, int64_t vocab, cudaStream_t stream) {
  Tensor bitmap;
  if (ids == nullptr || ids->elements() == 0) return bitmap;
  check_on_device(op, "suppressed_ids", *ids);
  check_same_dtype(op, "suppressed_ids", *ids, DataType::I32);
  bitmap = Tensor({(vocab + 31) / 32}, DataType::I32, Device::CUDA);
  write_suppression_bitmap(*ids, bitmap, stream);
  return bitmap;
}

void write_suppression_bitmap(const Tensor& ids, Tensor& bitmap, cudaStream_t stream) {
  check_on_device("suppression_bitmap", "ids", ids);
  check_on_device("suppression_bitmap", "bitmap", bitmap);
  const int64_t vocab = bitmap.elements() * 32;
  CUDA_CHECK(cudaMemsetAsync(bitmap.raw(), 0, bitmap.bytes(), stream));
  if (ids.elements() == 0) return;
  launch_kernel(suppression_bitmap_kernel, grid_size(ids.elements(), 256), 256, 0, stream, ids.data<int32_t>(),
                ids.elements(), static_cast<int>(std::min<int64_t>(vocab, INT32_MAX)), bitmap.data<uint32_t>());
}

Tensor launch_bitmap(const char* op, const Tensor* ids, const Tensor* prebuilt, int64_t vocab, cudaStream_t stream) {
  if (prebuilt == nullptr || ids == nullptr || ids->elements() == 0) return suppression_bitmap(op, ids, vocab, stream);
  check_on_device(op, "suppressed_bitmap", *prebuilt);
  SEQTRANS_CHECK(prebuilt->dtype() == DataType::I32 && prebuilt->elements() == (vocab + 31) / 32,
                 "{}: the suppression bitmap holds {} words for a vocabulary of {}", op, prebuilt->elements(), vocab);
  return *prebuilt;
}

}  // namespace seqtrans::cuda
