// attention on tensor cores: fp16 queries of head size 64, many of them, in the flash style. A block takes up
// to 64 query rows that share their keys, of one head, 16 per warp: 64 queries of a batch row (tq >= 8), or a
// tile of rows of their own (tq = 1, AttentionOptions::query_tiles: the packed encoder's tokens of a
// sentence, a prompt's tokens in a prefill pass, each with its own length, which makes the prefill causal).
// It stages 64 keys and their values at a time in shared memory; each warp computes its 16 x 64 scores with
// mma.m16n8k16 (fp32 sums), updates a running max and sum per query (online softmax, fp32), and adds the
// fp16-rounded weights times the values into fp32 sums. Before, each packed token read its sentence's keys
// alone through the decode kernel, on CUDA cores: at NLLB-600M's shape the encoder's attention read
// 64 GB a layer from L2 for 128 sentences of 350 tokens.
// A row's result depends on its own keys only: a key tile past its length adds exact zeros (rescale 1), so
// how rows are grouped into tiles (a prefill's chunks) does not change its bits.
// Keys at or past a row's length, or in no batch row, are staged as zeros (cache memory may hold NaN) and
// masked to -inf.
#include "cuda/kernels/attention_arguments.cuh"
#include "cuda/kernels/common.cuh"
#include "ops/op_types.h"

namespace seqtrans::cuda {
namespace {

constexpr int kHeadDim = 64;
constexpr int kWarps = 4;
constexpr int kThreads = 32 * kWarps;
// 130-143 registers a thread (3 blocks a multiprocessor); capped at 128 for 4 blocks, ptxas spills.
constexpr int kWarpQueries = 16;  // an mma's rows
constexpr int kBlockQueries = kWarpQueries * kWarps;
static_assert(kBlockQueries == ops::kAttentionTileRows, "a block takes one tile of query_tiles");
constexpr int kTileKeys = 64;
constexpr int kChannelSteps = kHeadDim / 16;  // k-steps of the scores' product
constexpr int kKeyBlocks = kTileKeys / 8;     // n-blocks of the scores (8 keys each)
constexpr int kValueBlocks = kHeadDim / 8;    // n-blocks of the output (8 channels each)
// A staged row: 64 halves and 8 of padding, 144 bytes, so that the 8 rows an ldmatrix (or a warp's 32-bit
// loads of 8 keys) reads fall in distinct banks.
constexpr int kRowHalves = kHeadDim + 8;

__device__ __forceinline__ unsigned load_pair(const __half* from) { return *reinterpret_cast<const unsigned*>(from); }

__device__ __forceinline__ unsigned pack_halves(float low, float high) {
  const __half2 pair = __floats2half2_rn(low, high);
  return *reinterpret_cast<const unsigned*>(&pair);
}

// Keys [first_key, first_key + 64) of one kv head and their values into the tiles: key j at
// key_base + key_index[j - first_key] * key_width, zeros where the index is negative (masked).
__device__ __forceinline__ void stage_tiles(const __half* __restrict__ keys, const __half* __restrict__ values,
                                            int64_t key_base, const int* key_index, int key_width,
                                            __half (*key_tile)[kRowHalves], __half (*value_tile)[kRowHalves]) {
  constexpr int kRowVectors = kHeadDim / 8;
  for (int i = threadIdx.x; i < kTileKeys * kRowVectors; i += kThreads) {
    const int r = i / kRowVectors, c = (i % kRowVectors) * 8, index = key_index[r];
    uint4 k{}, v{};
    if (index >= 0) {
      const int64_t offset = key_base + static_cast<int64_t>(index) * key_width + c;
      k = __ldg(reinterpret_cast<const uint4*>(keys + offset));
      v = __ldg(reinterpret_cast<const uint4*>(values + offset));
    }
    *reinterpret_cast<uint4*>(&key_tile[r][c]) = k;
    *reinterpret_cast<uint4*>(&value_tile[r][c]) = v;
  }
}

// Fragment layouts (PTX's mma.m16n8k16): a lane holds rows g = lane / 4 and g + 8 and columns 2 q, 2 q + 1
// (q = lane % 4) of each 16 x 8 block of fp32 sums; its a fragment holds the same rows at inputs 2 q, 2 q + 1
// and 2 q + 8, 2 q + 9 of a 16-wide k-step, which is how a score block's registers become the weights' a
// fragment without a trip through shared memory.
// kTiles: the block's rows are tile blockIdx.x of query_tiles (rows of their own, tq = 1), each with its own
// length; otherwise 64 queries of batch row blockIdx.z, with its length. kPerKey: key_rows is a table
// [rows, key_capacity] (key j in batch row key_rows[row, j] at position j % key_block), read from the tile's
// first row; otherwise [rows] or null, as the other attention kernels read it.
template <bool kTiles, bool kPerKey>
__global__ void __launch_bounds__(kThreads)
    attention_tensor_cores_kernel(const __half* __restrict__ query, const __half* __restrict__ keys,
                                  const __half* __restrict__ values, const int32_t* __restrict__ key_lengths,
                                  const int32_t* __restrict__ key_rows, const int32_t* __restrict__ query_tiles,
                                  int query_rows, __half* __restrict__ out, AttentionArguments args) {
  __shared__ __align__(16) __half key_tile[kTileKeys][kRowHalves];
  __shared__ __align__(16) __half value_tile[kTileKeys][kRowHalves];
  __shared__ int key_index[kTileKeys];  // the tile's keys' rows in keys seen as [positions, key_width]; -1: masked
  __shared__ int block_keys;            // the most keys a row of the block reads
  const int head = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  int first_row, rows, source_row;  // rows of query and out, and the row whose key_rows entry the block reads
  if constexpr (kTiles) {
    // A tile outside the rows computes nothing (a kernel cannot throw; the front end cannot read the tiles).
    first_row = min(max(query_tiles[2 * blockIdx.x], 0), query_rows);
    rows = min(min(max(query_tiles[2 * blockIdx.x + 1], 0), kBlockQueries), query_rows - first_row);
    source_row = first_row;
  } else {
    const int first_query = blockIdx.x * kBlockQueries;
    source_row = blockIdx.z;
    first_row = source_row * args.query_len + first_query;
    rows = min(kBlockQueries, args.query_len - first_query);
  }
  // Keys a row may read at most, and where key j of the block starts: position j from batch row key_row on
  // (none or rank-1 key_rows), or the table's entry (kPerKey).
  int key_limit = args.key_capacity, key_row = 0;
  if constexpr (!kPerKey) key_row = resolve_key_row(key_rows, source_row, args, key_limit);
  const int32_t* table = kPerKey ? key_rows + static_cast<int64_t>(source_row) * args.key_capacity : nullptr;
  const int64_t key_base = static_cast<int64_t>(key_row) * args.key_block * args.key_width +
                           static_cast<int64_t>(head / args.group) * kHeadDim;

  // This lane's rows: the warp's rows g and g + 8.
  const int row_low = warp * kWarpQueries + g, row_high = row_low + 8;
  const auto length_of = [&](int row) {
    if (row >= rows) return 0;
    return min(max(key_lengths[kTiles ? first_row + row : source_row], 0), key_limit);
  };
  const int length_low = length_of(row_low), length_high = length_of(row_high);
  if (threadIdx.x == 0) block_keys = 0;
  __syncthreads();
  if (q == 0) atomicMax(&block_keys, max(length_low, length_high));

  // The warp's 16 queries as a fragments; rows past the block's are zeros.
  const __half* query_low = query + (static_cast<int64_t>(first_row) + row_low) * args.width + head * kHeadDim;
  const __half* query_high = query_low + static_cast<int64_t>(8) * args.width;
  unsigned query_fragments[kChannelSteps][4];
#pragma unroll
  for (int s = 0; s < kChannelSteps; ++s) {
    const int c = 16 * s + 2 * q;
    query_fragments[s][0] = row_low < rows ? load_pair(query_low + c) : 0u;
    query_fragments[s][1] = row_high < rows ? load_pair(query_high + c) : 0u;
    query_fragments[s][2] = row_low < rows ? load_pair(query_low + c + 8) : 0u;
    query_fragments[s][3] = row_high < rows ? load_pair(query_high + c + 8) : 0u;
  }

  float sums[kValueBlocks][4];
#pragma unroll
  for (int n = 0; n < kValueBlocks; ++n) sums[n][0] = sums[n][1] = sums[n][2] = sums[n][3] = 0.0f;
  // Per row (low, high): the running max of the scores and this lane's share of the exponentials' sum.
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f};
  __syncthreads();  // block_keys is complete
  const int key_count = block_keys;

  for (int first_key = 0; first_key < key_count; first_key += kTileKeys) {
    __syncthreads();  // every warp is done with the previous tile
    if (threadIdx.x < kTileKeys) {
      const int j = first_key + threadIdx.x;
      int index = j < key_count ? j : -1;
      if constexpr (kPerKey) {
        const int batch_row = index >= 0 ? table[j] : -1;
        index = batch_row >= 0 && batch_row < args.key_batch ? batch_row * args.key_block + block_offset(j, args) : -1;
      }
      key_index[threadIdx.x] = index;
    }
    __syncthreads();
    stage_tiles(keys, values, key_base, key_index, args.key_width, key_tile, value_tile);
    __syncthreads();

    float scores[kKeyBlocks][4];
#pragma unroll
    for (int j = 0; j < kKeyBlocks; ++j) {
      scores[j][0] = scores[j][1] = scores[j][2] = scores[j][3] = 0.0f;
#pragma unroll
      for (int s = 0; s < kChannelSteps; ++s) {
        const __half* key = &key_tile[8 * j + g][16 * s + 2 * q];
        mma_m16n8k16(scores[j], query_fragments[s][0], query_fragments[s][1], query_fragments[s][2],
                     query_fragments[s][3], load_pair(key), load_pair(key + 8));
      }
    }
    float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
    for (int j = 0; j < kKeyBlocks; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = 8 * j + 2 * q + (e & 1);
        const bool valid = first_key + key < (e < 2 ? length_low : length_high) && key_index[key] >= 0;
        scores[j][e] = valid ? scores[j][e] * args.scale : -INFINITY;
        tile_max[e / 2] = fmaxf(tile_max[e / 2], scores[j][e]);
      }
    float rescale[2];
#pragma unroll
    for (int h = 0; h < 2; ++h) {
      // The 4 lanes of a row hold its 64 scores. A row may have none valid in this tile (past its length,
      // or masked): its max stays, and the tile adds exact zeros.
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(kFullMask, tile_max[h], 1));
      tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(kFullMask, tile_max[h], 2));
      const float new_max = fmaxf(running_max[h], tile_max[h]);
      rescale[h] = new_max == -INFINITY ? 1.0f : expf(running_max[h] - new_max);
      running_max[h] = new_max;
      running_sum[h] *= rescale[h];
    }
#pragma unroll
    for (int j = 0; j < kKeyBlocks; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const float max = running_max[e / 2];
        scores[j][e] = max == -INFINITY ? 0.0f : expf(scores[j][e] - max);  // 0 for a masked key
        running_sum[e / 2] += scores[j][e];
      }
#pragma unroll
    for (int n = 0; n < kValueBlocks; ++n) {
      sums[n][0] *= rescale[0];
      sums[n][1] *= rescale[0];
      sums[n][2] *= rescale[1];
      sums[n][3] *= rescale[1];
    }
    // sums += weights (16 x 64 keys, fp16) x values (64 keys x 64 channels), 16 keys a k-step.
#pragma unroll
    for (int s = 0; s < kTileKeys / 16; ++s) {
      const unsigned a0 = pack_halves(scores[2 * s][0], scores[2 * s][1]);
      const unsigned a1 = pack_halves(scores[2 * s][2], scores[2 * s][3]);
      const unsigned a2 = pack_halves(scores[2 * s + 1][0], scores[2 * s + 1][1]);
      const unsigned a3 = pack_halves(scores[2 * s + 1][2], scores[2 * s + 1][3]);
#pragma unroll
      for (int n = 0; n < kValueBlocks; n += 2) {
        // Lanes 0-7 and 8-15 address keys 0-7 and 8-15 of channels 8n.., lanes 16-31 the same of 8(n+1)..
        unsigned b[4];
        load_matrices_transposed(b, &value_tile[16 * s + (lane % 8) + 8 * ((lane / 8) % 2)][8 * n + 8 * (lane / 16)]);
        mma_m16n8k16(sums[n], a0, a1, a2, a3, b[0], b[1]);
        mma_m16n8k16(sums[n + 1], a0, a1, a2, a3, b[2], b[3]);
      }
    }
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    running_sum[h] += __shfl_xor_sync(kFullMask, running_sum[h], 1);
    running_sum[h] += __shfl_xor_sync(kFullMask, running_sum[h], 2);
  }
  // A row with no keys has no weights: zeros, like the CPU reference.
  const float inverse_low = running_sum[0] > 0.0f ? 1.0f / running_sum[0] : 0.0f;
  const float inverse_high = running_sum[1] > 0.0f ? 1.0f / running_sum[1] : 0.0f;
  __half* out_low = out + (static_cast<int64_t>(first_row) + row_low) * args.width + head * kHeadDim;
  __half* out_high = out_low + static_cast<int64_t>(8) * args.width;
#pragma unroll
  for (int n = 0; n < kValueBlocks; ++n) {
    const int c = 8 * n + 2 * q;
    if (row_low < rows)
      *reinterpret_cast<__half2*>(out_low + c) = __floats2half2_rn(sums[n][0] * inverse_low, sums[n][1] * inverse_low);
    if (row_high < rows)
      *reinterpret_cast<__half2*>(out_high + c) =
          __floats2half2_rn(sums[n][2] * inverse_high, sums[n][3] * inverse_high);
  }
}

}  // namespace

bool launch_attention_tensor_cores(const TensorCoreAttention& x, const AttentionArguments& args, cudaStream_t stream) {
  // Pairs of halves from query and out rows, 16-byte rows of keys and values.
  const bool aligned = args.width % 8 == 0 && args.key_width % 8 == 0 && is_aligned(x.query, 16) &&
                       is_aligned(x.out, 16) && is_aligned(x.keys, 16) && is_aligned(x.values, 16);
  if (args.head_dim != kHeadDim || !aligned) return false;
  const bool tiles = x.query_tiles != nullptr;
  const dim3 grid(static_cast<unsigned>(tiles ? x.tiles : (args.query_len + kBlockQueries - 1) / kBlockQueries),
                  static_cast<unsigned>(x.heads), static_cast<unsigned>(tiles ? 1 : x.batch));
  const auto kernel = tiles ? (x.per_key ? attention_tensor_cores_kernel<true, true>
                                         : attention_tensor_cores_kernel<true, false>)
                            : (x.per_key ? attention_tensor_cores_kernel<false, true>
                                         : attention_tensor_cores_kernel<false, false>);
  kernel<<<grid, kThreads, 0, stream>>>(x.query, x.keys, x.values, x.key_lengths, x.key_rows, x.query_tiles,
                                        x.batch, x.out, args);
  CUDA_CHECK_LAUNCH();
  return true;
}

}  // namespace seqtrans::cuda
