// The arguments the attention kernels share (cuda/kernels/attention.cu, attention_tensor_cores.cu), how a
// query row finds its keys, and their launchers' shared-memory opt-in.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <cstdint>

#include "cuda/kernels/common.cuh"

namespace seqtrans::cuda {

// Raises an attention kernel's dynamic shared memory limit past the default when a launch needs it; `what` names the need
// in the error where the device has too little.
template <typename Kernel>
void allow_shared_memory(Kernel kernel, size_t bytes, const char* what) {
  const cudaDeviceProp& properties = context().properties;
  SEQTRANS_CHECK(bytes <= properties.sharedMemPerBlockOptin,
                 "attention: {} needs {} bytes of shared memory, the device allows {}", what, bytes,
                 properties.sharedMemPerBlockOptin);
  if (bytes <= properties.sharedMemPerBlock) return;
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(kernel), bytes);
}

struct AttentionArguments {
  int query_len;
  int key_capacity;  // keys per row: keys.dim(1), the width of a per-key table, or the key span
  int key_block;     // positions per batch row of keys (keys.dim(1)): per-key key j sits at j % key_block
  int key_block_mask;  // key_block - 1 when it is a power of two (a mask replaces the division), else -1
  int key_batch;  // batch rows of keys and values (differs from the query's with key_rows)
  int width;      // of a query (and output) row
  int key_width;  // of a key (and value) row: kv heads * head_dim
  int group;      // query heads per kv head
  int head_dim;
  float scale;
};

// A query row's keys when they are not per key: batch row key_rows[b] (rank 1) or b (none), and at most
// as many keys as remain in keys from that row on (a key span runs on past its batch row); a row outside
// keys' batch extent reads none.
__device__ __forceinline__ int resolve_key_row(const int32_t* __restrict__ key_rows, int b,
                                               const AttentionArguments& args, int& key_len) {
  if (key_rows == nullptr) return b;
  const int key_row = key_rows[b];
  if (key_row < 0 || key_row >= args.key_batch)
    key_len = 0;  // no key to read: a zero row
  else
    key_len = min(key_len, (args.key_batch - key_row) * args.key_block);
  return key_row;
}

// Position of key j in its block.
__device__ __forceinline__ int block_offset(int j, const AttentionArguments& args) {
  return args.key_block_mask >= 0 ? (j & args.key_block_mask) : j % args.key_block;
}

// The tensor-core kernel's operands (attention_tensor_cores.cu): fp16, head size 64; queries by batch row
// (tq >= 8) or, with query_tiles, rows of their own (tq = 1) in tiles that share their keys.
struct TensorCoreAttention {
  const __half* query;
  const __half* keys;
  const __half* values;
  const int32_t* key_lengths;
  const int32_t* key_rows;     // null, [rows] or (per_key) [rows, key_capacity]
  const int32_t* query_tiles;  // null or [tiles, 2]: first row, rows (at most 64)
  __half* out;
  int batch, heads, tiles;
  bool per_key;
};

// Launches the tensor-core kernel where it applies (head size 64, aligned rows); false, launching nothing,
// otherwise.
bool launch_attention_tensor_cores(const TensorCoreAttention& operands, const AttentionArguments& args,
                                   cudaStream_t stream);

// Decode rows (tq = 1) of a grouped-query model with at least this many query heads per kv head, head size
// 64: the heads that share a kv head read it once, on tensor cores (attention_tensor_cores.cu). False,
// launching nothing, where it does not apply.
inline constexpr int kGqaDecodeMinGroup = 4;
bool launch_attention_gqa_decode(const TensorCoreAttention& operands, const AttentionArguments& args,
                                 cudaStream_t stream);

}  // namespace seqtrans::cuda
