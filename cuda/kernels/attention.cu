// attention: fused scores, masked softmax and weighted sum over variable-length padded batches.
// Kernels, one launch per call:
// - warp decode (few queries, e.g. the decoder step, tq = 1, with 16-byte loads): one warp per (query, head,
//   batch row), four per block, no block barrier (but one to merge split units, below). Groups of lanes
//   each hold one key (a lane a 16-byte slice of its head row), so a pass over the warp reads 32 / group
//   keys with coalesced loads; the lane keeps its slice of the query in registers. Chunks of keys: scores
//   (reduced within the group), an online softmax (running max and sum, warp-uniform rescaling) and the
//   weighted sum of the chunk's values, loaded together with its keys, into per-lane partial sums of the
//   lane's slice; the groups' partials are added once at the end. With few (query, head) units the chunks
//   of a unit are spread over up to 4 warps of its block, merged through shared memory.
// - decode (the fallback for few queries: unaligned rows, head size past 512 fp16 / 256 fp32): one block per
//   (query, head, batch row); groups of lanes compute one key's score, the block normalizes the scores in
//   shared memory, then (key partition, column) threads accumulate values and reduce across partitions;
// - tiled (many queries, the encoder; fp16 of head size 64 goes to tensor cores instead,
//   attention_tensor_cores.cu): one block per 16 queries of a (head, batch row); 32-key tiles of
//   keys and values staged in shared memory (fp32, odd row stride), one key per lane, 4 queries per warp,
//   online softmax per query (flash style).
// - rows of their own in tiles that share their keys (AttentionOptions::query_tiles: the packed encoder, a
//   prefill), fp16 of head size 64: tensor cores too, a tile a block (attention_by_tiles).
// Keys at or past key_lengths[b] are never read; a row with no keys gives zeros, like the CPU reference.
// Grouped-query attention: query head h reads kv head h / group of key rows key_width wide (group 1 and
// key_width = width without it); each (query, head) unit reads its kv head itself, except fp16 decode rows
// of head size 64 with 4-16 query heads a kv head, in enough (row, kv head) blocks: those heads read their kv
// head once, together, on tensor cores (launch_attention_gqa_decode).
// key_rows (AttentionOptions): rank 1 moves a query row's keys to batch row key_rows[b] (and the rows after
// it, with a key span), read once per unit (all kernels); rank 2 gives each key its own batch row key_rows[b, j], read once per key (decode kernels
// only; the front end allows it with tq = 1). Rows outside keys' batch extent mask the key (rank 2) or all
// of the row's keys (rank 1): a kernel cannot throw.
#include <type_traits>

#include "core/batch_invariance.h"
#include "cuda/kernels/attention_arguments.cuh"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

constexpr int kDecodeThreads = 128;
constexpr int kTiledThreads = 128;
constexpr int kTileQueries = 16;
constexpr int kQueriesPerWarp = 4;
constexpr int kTileKeys = 32;
// From this many queries on, the tiled kernel reads each key and value once per 16 queries instead of
// once per query.
constexpr int64_t kTiledMinQueries = 8;
constexpr int kTiledMaxHeadDim = 256;
constexpr int kWarpDecodeThreads = 128;
constexpr int kWarpDecodeWarps = kWarpDecodeThreads / 32;
// Warps a unit may take when units are few (batch 1: a unit per head): a block of that many warps each, so that a
// long history's keys are read in one chunk a warp rather than a chunk after another.
constexpr int kWarpDecodeMaxWarpsPerUnit = 16;
// 16-byte key loads per lane in one chunk (as many value loads): the loads in flight together per lane.
constexpr int kWarpDecodeLoads = 4;
// Blocks per multiprocessor the register allocation must allow (64 registers a thread): measured on the
// H200 at 512 slots, fp16 took 72 registers uncapped and ran 10-15% slower.
constexpr int kWarpDecodeMinBlocks = 8;

// kPerKey: key_rows is [b, key_capacity] (a block of keys per key); otherwise it is [b] or null (row b).
template <typename T, int N, bool kPerKey>
__global__ void __launch_bounds__(kDecodeThreads)
    attention_decode_kernel(const T* __restrict__ query, const T* __restrict__ keys, const T* __restrict__ values,
                            const int32_t* __restrict__ key_lengths, const int32_t* __restrict__ key_rows,
                            T* __restrict__ out, AttentionArguments args, int lanes_per_key) {
  start_after_inputs();
  using V = Vector<T, N>;
  const int vectors = args.head_dim / N;
  const int partitions = blockDim.x / vectors;
  extern __shared__ float shared[];
  float* scores = shared;                       // [key_capacity]
  float* query_row = scores + args.key_capacity;  // [head_dim]
  float* partial = query_row + args.head_dim;     // [partitions, head_dim]
  // kPerKey only: each key's row in keys seen as [key_batch * key_block, width], -1 where masked.
  int* key_index = reinterpret_cast<int*>(partial + partitions * args.head_dim);  // [key_capacity]
  __shared__ float scratch[32];

  const int t = blockIdx.x, head = blockIdx.y, b = blockIdx.z;
  int key_len = min(max(key_lengths[b], 0), args.key_capacity);
  const int key_row = kPerKey ? b : resolve_key_row(key_rows, b, args, key_len);
  const int64_t query_offset = (static_cast<int64_t>(b) * args.query_len + t) * args.width +
                               static_cast<int64_t>(head) * args.head_dim;
  for (int c = threadIdx.x; c < args.head_dim; c += blockDim.x) query_row[c] = to_float(query[query_offset + c]);
  __syncthreads();

  // Key j's head row starts at head_base + j * key_width, or (kPerKey) head_offset + key_index[j] * key_width.
  const int64_t head_offset = static_cast<int64_t>(head / args.group) * args.head_dim;
  const int64_t head_base = kPerKey ? head_offset
                                    : static_cast<int64_t>(key_row) * args.key_block * args.key_width + head_offset;
  const int32_t* key_rows_of_b = kPerKey ? key_rows + static_cast<int64_t>(b) * args.key_capacity : nullptr;
  const int keys_per_pass = blockDim.x / lanes_per_key;
  const int lane_in_group = threadIdx.x % lanes_per_key;
  for (int first = 0; first < key_len; first += keys_per_pass) {
    const int j = first + static_cast<int>(threadIdx.x) / lanes_per_key;
    float dot = 0.0f;
    bool valid = j < key_len;
    int64_t key_offset = head_base + static_cast<int64_t>(j) * args.key_width;
    if constexpr (kPerKey) {
      if (valid) {
        // One int32 per key: the lanes of a group load the same word (a broadcast).
        const int row = key_rows_of_b[j];
        valid = row >= 0 && row < args.key_batch;
        const int index = valid ? row * args.key_block + block_offset(j, args) : -1;  // the host checked it fits
        key_offset = head_base + static_cast<int64_t>(index) * args.key_width;
        if (lane_in_group == 0) key_index[j] = index;
      }
    }
    if (valid) {
      const V* row = reinterpret_cast<const V*>(keys + key_offset);
      for (int v = lane_in_group; v < vectors; v += lanes_per_key) {
        const V key = row[v];
#pragma unroll
        for (int e = 0; e < N; ++e) dot += query_row[v * N + e] * to_float(key.value[e]);
      }
    }
    for (int offset = lanes_per_key / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullMask, dot, offset);
    if (lane_in_group == 0 && j < key_len) scores[j] = valid ? dot * args.scale : -INFINITY;
  }
  __syncthreads();

  float local_max = -INFINITY;
  for (int j = threadIdx.x; j < key_len; j += blockDim.x) local_max = fmaxf(local_max, scores[j]);
  const float max_score = block_max(local_max, scratch);
  // Every key masked (rank-2 rows out of range): weights exp(-inf) = 0 rather than NaN.
  const float shift = max_score == -INFINITY ? 0.0f : max_score;
  float local_sum = 0.0f;
  for (int j = threadIdx.x; j < key_len; j += blockDim.x) {
    const float weight = expf(scores[j] - shift);
    scores[j] = weight;
    local_sum += weight;
  }
  const float total = block_sum(local_sum, scratch);  // its barriers also publish the weights (and key_index)

  const int partition = threadIdx.x / vectors, column = threadIdx.x % vectors;
  if (partition < partitions) {
    float sum[N] = {};
    for (int j = partition; j < key_len; j += partitions) {
      int index = j;
      if constexpr (kPerKey) {
        index = key_index[j];
        if (index < 0) continue;  // masked: weight 0, and its memory may not exist
      }
      const float weight = scores[j];
      const V value =
          reinterpret_cast<const V*>(values + head_base + static_cast<int64_t>(index) * args.key_width)[column];
#pragma unroll
      for (int e = 0; e < N; ++e) sum[e] += weight * to_float(value.value[e]);
    }
#pragma unroll
    for (int e = 0; e < N; ++e) partial[partition * args.head_dim + column * N + e] = sum[e];
  }
  __syncthreads();
  const float inverse_total = total > 0.0f ? 1.0f / total : 0.0f;
  for (int c = threadIdx.x; c < args.head_dim; c += blockDim.x) {
    float sum = 0.0f;
    for (int p = 0; p < partitions; ++p) sum += partial[p * args.head_dim + c];
    out[query_offset + c] = from_float<T>(sum * inverse_total);
  }
}

// The N elements of a 16-byte vector as floats (fp16: pairwise conversions).
template <int N>
__device__ __forceinline__ void vector_to_floats(const Vector<float, N>& x, float (&out)[N]) {
#pragma unroll
  for (int e = 0; e < N; ++e) out[e] = x.value[e];
}
template <int N>
__device__ __forceinline__ void vector_to_floats(const Vector<__half, N>& x, float (&out)[N]) {
#pragma unroll
  for (int e = 0; e < N; e += 2) {
    const float2 pair = __half22float2(*reinterpret_cast<const __half2*>(&x.value[e]));
    out[e] = pair.x;
    out[e + 1] = pair.y;
  }
}

// One warp per unit (query t, head, batch row b), units in (b, t, head) order; warps_per_unit (1 to kWarps)
// warps of a block share a unit, taking its chunks of keys in turn. kGroup lanes hold one key, each lane
// kSlices 16-byte slices of the head row (slice + s * kGroup): head_dim <= kGroup * kSlices * N.
// kPerKey: key_rows is [b, key_capacity]; otherwise [b] or null.
template <typename T, int kGroup, int kSlices, bool kPerKey, int kWarps>
__global__ void __launch_bounds__(kWarps * 32, (kWarpDecodeMinBlocks * kWarpDecodeWarps / kWarps))
    attention_warp_decode_kernel(const T* __restrict__ query, const T* __restrict__ keys, const T* __restrict__ values,
                                 const int32_t* __restrict__ key_lengths, const int32_t* __restrict__ key_rows,
                                 T* __restrict__ out, AttentionArguments args, int heads, int units,
                                 int warps_per_unit) {
  start_after_inputs();
  constexpr int N = kVectorWidth<T>;
  using V = Vector<T, N>;
  constexpr int kKeysPerPass = 32 / kGroup;
  constexpr int kPasses = kWarpDecodeLoads / kSlices;
  constexpr int kChunk = kKeysPerPass * kPasses;
  constexpr int kMaxHeadDim = kGroup * kSlices * N;
  // Used only with warps_per_unit > 1: each warp's partial result.
  __shared__ float merge_sums[kWarps][kMaxHeadDim];
  __shared__ float merge_max[kWarps], merge_total[kWarps];

  const int warp = static_cast<int>(threadIdx.x) / 32, lane = static_cast<int>(threadIdx.x) % 32;
  const int slice = lane % kGroup, group = lane / kGroup;  // group: which key of a pass
  const int unit =
      static_cast<int>(blockIdx.x) * (static_cast<int>(blockDim.x) / 32 / warps_per_unit) + warp / warps_per_unit;
  const int part = warp % warps_per_unit;
  const bool active = unit < units;  // uniform over the unit's warps
  const int vectors = args.head_dim / N;

  float sums[kSlices][N];
#pragma unroll
  for (int s = 0; s < kSlices; ++s)
#pragma unroll
    for (int e = 0; e < N; ++e) sums[s][e] = 0.0f;
  float running_max = -INFINITY, running_total = 0.0f;  // total: this lane's group's keys only, until the end
  int64_t query_offset = 0;

  if (active) {
    const int head = unit % heads, row = unit / heads, b = row / args.query_len;
    // kPerKey: the table entries of the keys of this warp's next chunk, loaded a chunk ahead, and the first
    // chunk's together with the row's length rather than after it (a round trip fewer before the first keys).
    // An entry past the length (nothing wrote it: a slot's history holds only the positions it reached) is
    // read but never used: the chunk loop masks keys at or past the length before it looks at their entries.
    const int32_t* key_rows_of_b = kPerKey ? key_rows + static_cast<int64_t>(b) * args.key_capacity : nullptr;
    int next_rows[kPasses];
    const auto load_rows = [&](int first) {
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        const int j = first + p * kKeysPerPass + group;
        next_rows[p] = j < args.key_capacity ? key_rows_of_b[j] : -1;  // one word per group: a broadcast
      }
    };
    if constexpr (kPerKey) load_rows(part * kChunk);
    int key_len = min(max(key_lengths[b], 0), args.key_capacity);
    const int key_row = kPerKey ? b : resolve_key_row(key_rows, b, args, key_len);
    query_offset = static_cast<int64_t>(row) * args.width + static_cast<int64_t>(head) * args.head_dim;
    const int64_t head_offset = static_cast<int64_t>(head / args.group) * args.head_dim;  // in a key row
    float q[kSlices][N];
#pragma unroll
    for (int s = 0; s < kSlices; ++s) {
      const int column = slice + s * kGroup;
      V x{};
      if (column < vectors) x = reinterpret_cast<const V*>(query + query_offset)[column];
      vector_to_floats(x, q[s]);
    }
    // Key j's head row starts at head_base + j * key_width, or (kPerKey) head_offset + index * key_width with index
    // = key_rows[b, j] * key_block + j % key_block.
    const int64_t head_base =
        kPerKey ? head_offset : static_cast<int64_t>(key_row) * args.key_block * args.key_width + head_offset;

    for (int first = part * kChunk; first < key_len; first += warps_per_unit * kChunk) {
      bool valid[kPasses];
      V key[kPasses][kSlices], value[kPasses][kSlices];
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        const int j = first + p * kKeysPerPass + group;
        valid[p] = j < key_len;
        int index = j;
        if constexpr (kPerKey) {
          const int batch_row = next_rows[p];
          valid[p] = valid[p] && batch_row >= 0 && batch_row < args.key_batch;
          if (valid[p]) index = batch_row * args.key_block + block_offset(j, args);  // the host checked it fits
        }
        const int64_t offset = head_base + static_cast<int64_t>(index) * args.key_width;
#pragma unroll
        for (int s = 0; s < kSlices; ++s) {
          const int column = slice + s * kGroup;
          key[p][s] = V{};
          value[p][s] = V{};
          if (valid[p] && column < vectors) {  // masked keys may not exist: never read
            key[p][s] = reinterpret_cast<const V*>(keys + offset)[column];
            value[p][s] = reinterpret_cast<const V*>(values + offset)[column];
          }
        }
      }
      if constexpr (kPerKey) load_rows(first + warps_per_unit * kChunk);
      float score[kPasses];
      float chunk_max = -INFINITY;
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        float dot = 0.0f;
#pragma unroll
        for (int s = 0; s < kSlices; ++s) {
          float k[N];
          vector_to_floats(key[p][s], k);
#pragma unroll
          for (int e = 0; e < N; ++e) dot += q[s][e] * k[e];
        }
#pragma unroll
        for (int offset = kGroup / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullMask, dot, offset);
        score[p] = valid[p] ? dot * args.scale : -INFINITY;
        chunk_max = fmaxf(chunk_max, score[p]);
      }
#pragma unroll
      for (int offset = kGroup; offset < 32; offset *= 2)
        chunk_max = fmaxf(chunk_max, __shfl_xor_sync(kFullMask, chunk_max, offset));
      const float new_max = fmaxf(running_max, chunk_max);
      // No valid key yet (every key so far masked): weights exp(-inf) = 0 rather than NaN.
      const float shift = new_max == -INFINITY ? 0.0f : new_max;
      const float rescale = expf(running_max - shift);
      running_max = new_max;
      running_total *= rescale;
#pragma unroll
      for (int s = 0; s < kSlices; ++s)
#pragma unroll
        for (int e = 0; e < N; ++e) sums[s][e] *= rescale;
#pragma unroll
      for (int p = 0; p < kPasses; ++p) {
        const float weight = expf(score[p] - shift);  // 0 for masked keys (their values are zeros)
        running_total += weight;
#pragma unroll
        for (int s = 0; s < kSlices; ++s) {
          float v[N];
          vector_to_floats(value[p][s], v);
#pragma unroll
          for (int e = 0; e < N; ++e) sums[s][e] += weight * v[e];
        }
      }
    }
    // Add the groups' partials: every lane of a slice then holds the warp's totals.
#pragma unroll
    for (int offset = kGroup; offset < 32; offset *= 2) {
      running_total += __shfl_xor_sync(kFullMask, running_total, offset);
#pragma unroll
      for (int s = 0; s < kSlices; ++s)
#pragma unroll
        for (int e = 0; e < N; ++e) sums[s][e] += __shfl_xor_sync(kFullMask, sums[s][e], offset);
    }
  }

  if (warps_per_unit > 1) {  // uniform over the block
    if (active && group == 0) {
#pragma unroll
      for (int s = 0; s < kSlices; ++s)
#pragma unroll
        for (int e = 0; e < N; ++e) merge_sums[warp][(slice + s * kGroup) * N + e] = sums[s][e];
      if (lane == 0) {
        merge_max[warp] = running_max;
        merge_total[warp] = running_total;
      }
    }
    __syncthreads();
    if (!active || part != 0) return;
    const int first_warp = warp;  // part 0 is the unit's first warp
    float unit_max = -INFINITY;
    for (int w = 0; w < warps_per_unit; ++w) unit_max = fmaxf(unit_max, merge_max[first_warp + w]);
    const float shift = unit_max == -INFINITY ? 0.0f : unit_max;
    running_total = 0.0f;
#pragma unroll
    for (int s = 0; s < kSlices; ++s)
#pragma unroll
      for (int e = 0; e < N; ++e) sums[s][e] = 0.0f;
    for (int w = 0; w < warps_per_unit; ++w) {
      const float factor = expf(merge_max[first_warp + w] - shift);  // 0 for a warp without valid keys
      running_total += factor * merge_total[first_warp + w];
#pragma unroll
      for (int s = 0; s < kSlices; ++s) {
        const int column = slice + s * kGroup;
#pragma unroll
        for (int e = 0; e < N; ++e) sums[s][e] += factor * merge_sums[first_warp + w][column * N + e];
      }
    }
  }
  if (!active || group != 0) return;
  const float inverse_total = running_total > 0.0f ? 1.0f / running_total : 0.0f;
#pragma unroll
  for (int s = 0; s < kSlices; ++s) {
    const int column = slice + s * kGroup;
    if (column >= vectors) continue;
    V result;
#pragma unroll
    for (int e = 0; e < N; ++e) result.value[e] = from_float<T>(sums[s][e] * inverse_total);
    reinterpret_cast<V*>(out + query_offset)[column] = result;
  }
}

// Stages keys and values [first_key, first_key + 32) of one head as fp32 in shared memory, zeros past the
// length (cache memory there may hold anything, even NaN). N: elements per global load.
template <typename T, int N>
__device__ __forceinline__ void stage_key_tile(const T* __restrict__ keys, const T* __restrict__ values,
                                               int64_t head_base, int first_key, int key_len, int width, int head_dim,
                                               float* key_tile, float* value_tile) {
  using V = Vector<T, N>;
  const int row_vectors = head_dim / N, stride = head_dim + 1;
  // Lane = key row: with the odd row stride, each store instruction hits 32 distinct banks.
  for (int i = threadIdx.x; i < kTileKeys * row_vectors; i += blockDim.x) {
    const int r = i % kTileKeys, c = (i / kTileKeys) * N, key = first_key + r;
    V k{}, v{};
    if (key < key_len) {
      const int64_t offset = head_base + static_cast<int64_t>(key) * width + c;
      k = *reinterpret_cast<const V*>(keys + offset);
      v = *reinterpret_cast<const V*>(values + offset);
    }
#pragma unroll
    for (int e = 0; e < N; ++e) {
      key_tile[r * stride + c + e] = to_float(k.value[e]);
      value_tile[r * stride + c + e] = to_float(v.value[e]);
    }
  }
}

// kChannels: head channels per lane (head_dim <= 32 * kChannels); N: elements per global load.
template <typename T, int kChannels, int N>
__global__ void __launch_bounds__(kTiledThreads, 4)
    attention_tiled_kernel(const T* __restrict__ query, const T* __restrict__ keys, const T* __restrict__ values,
                           const int32_t* __restrict__ key_lengths, const int32_t* __restrict__ key_rows,
                           T* __restrict__ out, AttentionArguments args) {
  start_after_inputs();
  extern __shared__ float shared[];
  const int head_dim = args.head_dim, key_stride = head_dim + 1;  // odd stride: lanes hit distinct banks
  float* query_tile = shared;                                 // [16, head_dim]
  float* key_tile = query_tile + kTileQueries * head_dim;     // [32, head_dim + 1]
  float* value_tile = key_tile + kTileKeys * key_stride;      // [32, head_dim + 1]

  const int head = blockIdx.y, b = blockIdx.z, first_query = blockIdx.x * kTileQueries;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  int key_len = min(max(key_lengths[b], 0), args.key_capacity);
  // key_rows here is [b] or null: all keys of the row from one batch row on.
  const int key_row = resolve_key_row(key_rows, b, args, key_len);
  const int64_t head_offset = static_cast<int64_t>(head) * head_dim;  // in a query row
  const int64_t head_base = static_cast<int64_t>(key_row) * args.key_block * args.key_width +
                            static_cast<int64_t>(head / args.group) * head_dim;

  for (int i = threadIdx.x; i < kTileQueries * head_dim; i += blockDim.x) {
    const int t = first_query + i / head_dim;
    query_tile[i] = t < args.query_len
                        ? to_float(query[(static_cast<int64_t>(b) * args.query_len + t) * args.width + head_offset +
                                         i % head_dim])
                        : 0.0f;
  }

  float running_max[kQueriesPerWarp], running_sum[kQueriesPerWarp], acc[kQueriesPerWarp][kChannels];
#pragma unroll
  for (int q = 0; q < kQueriesPerWarp; ++q) {
    running_max[q] = -INFINITY;
    running_sum[q] = 0.0f;
#pragma unroll
    for (int i = 0; i < kChannels; ++i) acc[q][i] = 0.0f;
  }
  const float* warp_queries = query_tile + warp * kQueriesPerWarp * head_dim;

  for (int first_key = 0; first_key < key_len; first_key += kTileKeys) {
    __syncthreads();  // the previous tile is consumed (and, the first time, the queries are staged)
    stage_key_tile<T, N>(keys, values, head_base, first_key, key_len, args.key_width, head_dim, key_tile, value_tile);
    __syncthreads();

    const bool valid = first_key + lane < key_len;
    const int tile_keys = min(kTileKeys, key_len - first_key);
    float weight[kQueriesPerWarp] = {};
    const float* key_row = key_tile + lane * key_stride;
    if (head_dim % 4 == 0) {
      // Four channels of four queries per step: one 16-byte broadcast load per query.
      for (int c = 0; c < head_dim; c += 4) {
        const float k0 = key_row[c], k1 = key_row[c + 1], k2 = key_row[c + 2], k3 = key_row[c + 3];
#pragma unroll
        for (int q = 0; q < kQueriesPerWarp; ++q) {
          const float4 query4 = *reinterpret_cast<const float4*>(warp_queries + q * head_dim + c);
          weight[q] += query4.x * k0 + query4.y * k1 + query4.z * k2 + query4.w * k3;
        }
      }
    } else {
#pragma unroll 4
      for (int c = 0; c < head_dim; ++c) {
        const float k = key_row[c];
#pragma unroll
        for (int q = 0; q < kQueriesPerWarp; ++q) weight[q] += warp_queries[q * head_dim + c] * k;
      }
    }
#pragma unroll
    for (int q = 0; q < kQueriesPerWarp; ++q) {
      const float score = valid ? weight[q] * args.scale : -INFINITY;
      const float new_max = fmaxf(running_max[q], warp_max(score));  // finite: the tile has a valid key
      const float rescale = expf(running_max[q] - new_max);
      weight[q] = valid ? expf(score - new_max) : 0.0f;
      running_sum[q] = running_sum[q] * rescale + warp_sum(weight[q]);
      running_max[q] = new_max;
#pragma unroll
      for (int i = 0; i < kChannels; ++i) acc[q][i] *= rescale;
    }
    for (int j = 0; j < tile_keys; ++j) {
      float value[kChannels];
#pragma unroll
      for (int i = 0; i < kChannels; ++i) {
        const int c = lane + 32 * i;
        value[i] = c < head_dim ? value_tile[j * key_stride + c] : 0.0f;
      }
#pragma unroll
      for (int q = 0; q < kQueriesPerWarp; ++q) {
        const float w = __shfl_sync(kFullMask, weight[q], j);
#pragma unroll
        for (int i = 0; i < kChannels; ++i) acc[q][i] += w * value[i];
      }
    }
  }

#pragma unroll
  for (int q = 0; q < kQueriesPerWarp; ++q) {
    const int t = first_query + warp * kQueriesPerWarp + q;
    if (t >= args.query_len) continue;
    const float inverse_sum = running_sum[q] > 0.0f ? 1.0f / running_sum[q] : 0.0f;
    T* out_row = out + (static_cast<int64_t>(b) * args.query_len + t) * args.width + head_offset;
#pragma unroll
    for (int i = 0; i < kChannels; ++i) {
      const int c = lane + 32 * i;
      if (c < head_dim) out_row[c] = from_float<T>(acc[q][i] * inverse_sum);
    }
  }
}

// The operands of one call, passed down the launchers together.
struct AttentionOperands {
  const Tensor& query;
  const Tensor& keys;
  const Tensor& values;
  const Tensor& key_lengths;
  const Tensor* key_rows;  // null, [b] or [b, key_capacity] int32
  Tensor& out;
};

const int32_t* key_rows_data(const AttentionOperands& x) {
  return x.key_rows != nullptr ? x.key_rows->data<int32_t>() : nullptr;
}

bool per_key_rows(const AttentionOperands& x) { return x.key_rows != nullptr && x.key_rows->rank() == 2; }

template <typename T, int N, bool kPerKey>
void launch_decode(const AttentionOperands& x, const AttentionArguments& args, cudaStream_t stream) {
  const int vectors = args.head_dim / N;
  SEQTRANS_CHECK(vectors <= kDecodeThreads, "attention: head size {} is too large for the CUDA kernel", args.head_dim);
  int lanes_per_key = 1;
  while (lanes_per_key < vectors && lanes_per_key < 32) lanes_per_key *= 2;
  const int partitions = kDecodeThreads / vectors;
  // scores [key_capacity], query row [head_dim], partial sums [partitions, head_dim], key_index [key_capacity].
  const size_t shared_bytes =
      sizeof(float) * (static_cast<size_t>(args.key_capacity) + args.head_dim +
                       static_cast<size_t>(partitions) * args.head_dim) +
      (kPerKey ? sizeof(int) * static_cast<size_t>(args.key_capacity) : 0);
  allow_shared_memory(attention_decode_kernel<T, N, kPerKey>, shared_bytes, "a key length this long");
  const dim3 grid(static_cast<unsigned>(args.query_len), static_cast<unsigned>(x.query.dim(2) / args.head_dim),
                  static_cast<unsigned>(x.query.dim(0)));
  launch_kernel(attention_decode_kernel<T, N, kPerKey>, grid, kDecodeThreads, shared_bytes, stream, x.query.data<T>(),
                x.keys.data<T>(), x.values.data<T>(), x.key_lengths.data<int32_t>(), key_rows_data(x), x.out.data<T>(),
                args, lanes_per_key);
}

template <typename T, int N>
void launch_decode(const AttentionOperands& x, const AttentionArguments& args, cudaStream_t stream) {
  if (per_key_rows(x)) return launch_decode<T, N, true>(x, args, stream);
  launch_decode<T, N, false>(x, args, stream);
}

template <typename T, int kGroup, int kSlices, bool kPerKey>
void launch_warp_decode_with(const AttentionOperands& x, const AttentionArguments& args, int heads, int units,
                             cudaStream_t stream) {
  constexpr int kChunk = (32 / kGroup) * (kWarpDecodeLoads / kSlices);
  // Few units leave most of the GPU idle: then up to 4 warps share a unit whose keys may span several
  // chunks, reading them in parallel (the capacity bounds the keys; the lengths are on the device).
  const int64_t warps_wanted = int64_t{8} * context().properties.multiProcessorCount;
  // Batch-invariant mode keeps one warp a unit: how its keys are split must not follow the batch.
  int warps_per_unit = 1;
  while (!batch_invariant() && warps_per_unit < kWarpDecodeMaxWarpsPerUnit &&
         int64_t{2} * warps_per_unit * units <= warps_wanted && args.key_capacity > warps_per_unit * kChunk)
    warps_per_unit *= 2;
  // Blocks of 4 warps, or of one unit's warps where a unit takes more.
  const auto launch = [&](auto kernel, int block_warps) {
    const int units_per_block = block_warps / warps_per_unit;
    const unsigned blocks = static_cast<unsigned>((int64_t{units} + units_per_block - 1) / units_per_block);
    launch_kernel(kernel, blocks, block_warps * 32, 0, stream, x.query.data<T>(), x.keys.data<T>(), x.values.data<T>(),
                  x.key_lengths.data<int32_t>(), key_rows_data(x), x.out.data<T>(), args, heads, units, warps_per_unit);
  };
  if (warps_per_unit <= kWarpDecodeWarps)
    launch(attention_warp_decode_kernel<T, kGroup, kSlices, kPerKey, kWarpDecodeWarps>, kWarpDecodeWarps);
  else
    launch(attention_warp_decode_kernel<T, kGroup, kSlices, kPerKey, kWarpDecodeMaxWarpsPerUnit>, warps_per_unit);
}

// The warp decode kernel for this head size, if it has one (16-byte loads were checked by the caller).
template <typename T, bool kPerKey>
bool launch_warp_decode(const AttentionOperands& x, const AttentionArguments& args, cudaStream_t stream) {
  const int64_t heads = x.query.dim(2) / args.head_dim;
  const int64_t units = x.query.dim(0) * args.query_len * heads;
  if (units > INT32_MAX) return false;
  const int h = static_cast<int>(heads), u = static_cast<int>(units);
  const int vectors = args.head_dim / kVectorWidth<T>;  // 16-byte slices of a head row
  if (vectors <= 4)
    launch_warp_decode_with<T, 4, 1, kPerKey>(x, args, h, u, stream);
  else if (vectors <= 8)
    launch_warp_decode_with<T, 8, 1, kPerKey>(x, args, h, u, stream);
  else if (vectors <= 16)
    launch_warp_decode_with<T, 16, 1, kPerKey>(x, args, h, u, stream);
  else if (vectors <= 32)
    launch_warp_decode_with<T, 32, 1, kPerKey>(x, args, h, u, stream);
  else if (vectors <= 64)
    launch_warp_decode_with<T, 32, 2, kPerKey>(x, args, h, u, stream);
  else
    return false;
  return true;
}

template <typename T, int kChannels, int N>
void launch_tiled_with(const AttentionOperands& x, const AttentionArguments& args, cudaStream_t stream) {
  const size_t shared_bytes =
      sizeof(float) * (static_cast<size_t>(kTileQueries) * args.head_dim + 2 * kTileKeys * (args.head_dim + 1));
  allow_shared_memory(attention_tiled_kernel<T, kChannels, N>, shared_bytes, "this head size");
  const dim3 grid(static_cast<unsigned>((args.query_len + kTileQueries - 1) / kTileQueries),
                  static_cast<unsigned>(x.query.dim(2) / args.head_dim), static_cast<unsigned>(x.query.dim(0)));
  launch_kernel(attention_tiled_kernel<T, kChannels, N>, grid, kTiledThreads, shared_bytes, stream, x.query.data<T>(),
                x.keys.data<T>(), x.values.data<T>(), x.key_lengths.data<int32_t>(), key_rows_data(x), x.out.data<T>(),
                args);
}

template <typename T, int kChannels>
void launch_tiled(const AttentionOperands& x, const AttentionArguments& args, cudaStream_t stream) {
  constexpr int kWidth = kVectorWidth<T>;
  // 16-byte loads of key and value rows need every head row to start on a 16-byte boundary.
  if (args.head_dim % kWidth == 0 && args.key_width % kWidth == 0 && is_aligned(x.keys.raw(), 16) &&
      is_aligned(x.values.raw(), 16))
    return launch_tiled_with<T, kChannels, kWidth>(x, args, stream);
  launch_tiled_with<T, kChannels, 1>(x, args, stream);
}

// The tensor-core kernel's operands; query_tiles null: by batch row.
TensorCoreAttention tensor_core_operands(const AttentionOperands& x, const AttentionArguments& args,
                                         const Tensor* query_tiles) {
  return TensorCoreAttention{x.query.data<__half>(),
                             x.keys.data<__half>(),
                             x.values.data<__half>(),
                             x.key_lengths.data<int32_t>(),
                             key_rows_data(x),
                             query_tiles != nullptr ? query_tiles->data<int32_t>() : nullptr,
                             x.out.data<__half>(),
                             static_cast<int>(x.query.dim(0)),
                             static_cast<int>(x.query.dim(2) / args.head_dim),
                             query_tiles != nullptr ? static_cast<int>(query_tiles->dim(0)) : 0,
                             per_key_rows(x)};
}

template <typename T>
void launch_attention(const AttentionOperands& x, const AttentionArguments& args, cudaStream_t stream) {
  // A row per key (rank-2 key_rows) exists in the decode kernel only.
  if (args.query_len >= kTiledMinQueries && args.head_dim <= kTiledMaxHeadDim && !per_key_rows(x)) {
    if constexpr (std::is_same_v<T, __half>) {
      if (launch_attention_tensor_cores(tensor_core_operands(x, args, nullptr), args, stream)) return;
    }
    if (args.head_dim <= 32) return launch_tiled<T, 1>(x, args, stream);
    if (args.head_dim <= 64) return launch_tiled<T, 2>(x, args, stream);
    if (args.head_dim <= 128) return launch_tiled<T, 4>(x, args, stream);
    return launch_tiled<T, 8>(x, args, stream);
  }
  constexpr int kWidth = kVectorWidth<T>;
  // 16-byte loads need every head row to start on a 16-byte boundary.
  const bool vectorized = args.head_dim % kWidth == 0 && args.width % kWidth == 0 && is_aligned(x.query.raw(), 16) &&
                          is_aligned(x.keys.raw(), 16) && is_aligned(x.values.raw(), 16);
  if constexpr (std::is_same_v<T, __half>) {
    if (launch_attention_gqa_decode(tensor_core_operands(x, args, nullptr), args, stream)) return;
  }
  if (vectorized && is_aligned(x.out.raw(), 16)) {
    const bool launched = per_key_rows(x) ? launch_warp_decode<T, true>(x, args, stream)
                                          : launch_warp_decode<T, false>(x, args, stream);
    if (launched) return;
  }
  if (vectorized) return launch_decode<T, kWidth>(x, args, stream);
  launch_decode<T, 1>(x, args, stream);
}

AttentionArguments attention_arguments(const Tensor& query, const Tensor& keys, const ops::AttentionOptions& options) {
  const Tensor* key_rows = options.key_rows;
  AttentionArguments args;
  args.query_len = static_cast<int>(query.dim(1));
  const bool per_key = key_rows != nullptr && key_rows->rank() == 2;
  args.key_capacity =
      static_cast<int>(per_key ? key_rows->dim(1) : options.key_span > 0 ? options.key_span : keys.dim(1));
  args.key_block = static_cast<int>(keys.dim(1));
  args.key_block_mask = (args.key_block & (args.key_block - 1)) == 0 ? args.key_block - 1 : -1;
  args.key_batch = static_cast<int>(keys.dim(0));
  args.width = static_cast<int>(query.dim(2));
  args.key_width = static_cast<int>(keys.dim(2));
  args.group = options.num_kv_heads == 0 ? 1 : options.num_heads / options.num_kv_heads;
  args.head_dim = static_cast<int>(query.dim(2) / options.num_heads);
  args.scale = options.scale;
  return args;
}

// Rows of their own in tiles that share their keys (AttentionOptions::query_tiles), fp16, on tensor cores;
// false where the kernel does not apply (the caller then runs the rows one by one).
bool attention_by_tiles(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
                        const ops::AttentionOptions& options, Tensor& out, cudaStream_t stream) {
  const Tensor& tiles = *options.query_tiles;
  check_on_device("attention", "query_tiles", tiles);
  SEQTRANS_CHECK(tiles.dtype() == DataType::I32 && tiles.rank() == 2 && tiles.dim(1) == 2,
                 "attention: query_tiles {} {} is not [tiles, 2] int32", dtype_name(tiles.dtype()),
                 shape_string(tiles.shape()));
  if (tiles.dim(0) == 0) return false;
  const cudaDeviceProp& properties = context().properties;
  if (tiles.dim(0) > properties.maxGridSize[0] || options.num_heads > properties.maxGridSize[1] ||
      query.dim(0) > INT32_MAX || keys.dim(0) * keys.dim(1) > INT32_MAX)
    return false;
  const AttentionArguments args = attention_arguments(query, keys, options);
  const AttentionOperands operands{query, keys, values, key_lengths, options.key_rows, out};
  return launch_attention_tensor_cores(tensor_core_operands(operands, args, &tiles), args, stream);
}

}  // namespace

void attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
               const ops::AttentionOptions& options, Tensor& out, cudaStream_t stream) {
  const char* op = "attention";
  check_on_device(op, "query", query);
  check_on_device(op, "keys", keys);
  check_on_device(op, "values", values);
  check_on_device(op, "key_lengths", key_lengths);
  check_same_dtype(op, "keys", keys, query.dtype());
  check_same_dtype(op, "values", values, query.dtype());
  const Tensor* key_rows = options.key_rows;
  if (key_rows != nullptr) {
    check_on_device(op, "key_rows", *key_rows);
    SEQTRANS_CHECK(key_rows->dtype() == DataType::I32 && (key_rows->rank() == 1 || key_rows->rank() == 2),
                   "attention: key_rows {} {} is neither [b] nor [b, T] int32", dtype_name(key_rows->dtype()),
                   shape_string(key_rows->shape()));
  }
  const int64_t batch = query.dim(0), query_len = query.dim(1), width = query.dim(2);
  if (batch == 0 || query_len == 0 || width == 0) return;
  const cudaDeviceProp& properties = context().properties;
  if (options.query_tiles != nullptr && query_len == 1 && query.dtype() == DataType::F16 &&
      attention_by_tiles(query, keys, values, key_lengths, options, out, stream))
    return;
  // The decode and tiled kernels take the batch as their grid's z extent (65,535 on these GPUs): a larger
  // batch runs in slices of query rows, each slice with the keys it reads (all of them when key_rows
  // addresses the keys).
  const int64_t batch_slice = properties.maxGridSize[2];
  if (batch > batch_slice) {
    for (int64_t begin = 0; begin < batch; begin += batch_slice) {
      const int64_t end = std::min(batch, begin + batch_slice);
      ops::AttentionOptions slice_options = options;
      slice_options.query_tiles = nullptr;  // the tiles number the rows of the whole batch
      Tensor slice_key_rows;
      if (key_rows != nullptr) {
        slice_key_rows = key_rows->slice_rows(begin, end);
        slice_options.key_rows = &slice_key_rows;
      }
      const bool own_keys = key_rows == nullptr;
      Tensor slice_out = out.slice_rows(begin, end);
      attention(query.slice_rows(begin, end), own_keys ? keys.slice_rows(begin, end) : keys,
                own_keys ? values.slice_rows(begin, end) : values, key_lengths.slice_rows(begin, end), slice_options,
                slice_out, stream);
    }
    return;
  }
  SEQTRANS_CHECK(options.num_heads <= properties.maxGridSize[1] &&
                     query_len <= properties.maxGridSize[0] && keys.dim(1) <= (int64_t{1} << 30) &&
                     (key_rows == nullptr || key_rows->rank() == 1 || key_rows->dim(1) <= (int64_t{1} << 30)) &&
                     keys.dim(0) * keys.dim(1) <= INT32_MAX,
                 "attention: shape {} x {} exceeds the CUDA grid limits", shape_string(query.shape()),
                 shape_string(keys.shape()));
  const AttentionArguments args = attention_arguments(query, keys, options);
  const AttentionOperands operands{query, keys, values, key_lengths, key_rows, out};
  if (query.dtype() == DataType::F16)
    launch_attention<__half>(operands, args, stream);
  else
    launch_attention<float>(operands, args, stream);
}

}  // namespace seqtrans::cuda
