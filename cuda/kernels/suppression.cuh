// Suppressed ids as a bitmap of the vocabulary, built on the device once per launch (or once by the caller:
// ops::suppression_bitmap) and read by the output layer kernels (log_softmax_topk, sample_tokens): one bit
// test per element instead of a list search.
#pragma once

#include <cuda_runtime_api.h>

#include "core/tensor.h"

namespace seqtrans::cuda {

// [ceil(vocab / 32)] words, bit i set when id i is in `ids` ([n] int32 on the device); ids outside the
// vocabulary are skipped. Undefined when `ids` is null or empty.
Tensor suppression_bitmap(const char* op, const Tensor* ids, int64_t vocab, cudaStream_t stream);
// What a launch reads: `prebuilt` (suppression_bitmap of the same ids, made earlier) when given, else one
// built now.
Tensor launch_bitmap(const char* op, const Tensor* ids, const Tensor* prebuilt, int64_t vocab, cudaStream_t stream);

// Whether bit i of a bitmap is set (false for a null bitmap).
__device__ __forceinline__ bool is_suppressed(const uint32_t* bitmap, int i) {
  return bitmap != nullptr && ((bitmap[i >> 5] >> (i & 31)) & 1u);
}

}  // namespace seqtrans::cuda
