// attention on tensor cores: fp16 queries of head size 64, many of them, in the flash style. A block takes up
// to 64 query rows that share their keys, of one head, 16 per warp: 64 queries of a batch row (tq >= 8), or a
// tile of rows of their own (tq = 1, AttentionOptions::query_tiles: the packed encoder's tokens of a
// sentence, a prompt's tokens in a prefill pass, each with its own length, which makes the prefill causal).
// It stages 64 keys and their values at a time in shared memory, the next 64 copied (cp.async) while the
// warps compute on these; each warp computes its 16 x 64 scores with
// mma.m16n8k16 (fp32 sums), updates a running max and sum per query (online softmax, fp32), and adds the
// fp16-rounded weights times the values into fp32 sums. Before, each packed token read its sentence's keys
// alone through the decode kernel, on CUDA cores: at NLLB-600M's shape the encoder's attention read
// 64 GB a layer from L2 for 128 sentences of 350 tokens.
// A row's result depends on its own keys only: a key tile past its length adds exact zeros (rescale 1), so
// how rows are grouped into tiles (a prefill's chunks) does not change its bits.
// Keys at or past a row's length, or in no batch row, are staged as zeros (cache memory may hold NaN) and
// masked to -inf.
#include "core/batch_invariance.h"
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

// Starts copying keys [first_key, first_key + 64) of one kv head and their values into the tiles (cp.async,
// one group a thread): key j at key_base + key_index[j - first_key] * key_width, zeros where the index is
// negative (masked).
__device__ __forceinline__ void stage_tiles(const __half* __restrict__ keys, const __half* __restrict__ values,
                                            int64_t key_base, const int* key_index, int key_width,
                                            __half (*key_tile)[kRowHalves], __half (*value_tile)[kRowHalves]) {
  constexpr int kRowVectors = kHeadDim / 8;
  for (int i = threadIdx.x; i < kTileKeys * kRowVectors; i += kThreads) {
    const int r = i / kRowVectors, c = (i % kRowVectors) * 8, index = key_index[r];
    const int64_t offset = index >= 0 ? key_base + static_cast<int64_t>(index) * key_width + c : 0;
    copy_async_16_or_zeros(&key_tile[r][c], keys + offset, index >= 0);
    copy_async_16_or_zeros(&value_tile[r][c], values + offset, index >= 0);
  }
  commit_async_copies();
}

// Fragment layouts (PTX's mma.m16n8k16): a lane holds rows g = lane / 4 and g + 8 and columns 2 q, 2 q + 1
// (q = lane % 4) of each 16 x 8 block of fp32 sums; its a fragment holds the same rows at inputs 2 q, 2 q + 1
// and 2 q + 8, 2 q + 9 of a 16-wide k-step, which is how a score block's registers become the weights' a
// fragment without a trip through shared memory.
// The steps both kernels take over a staged tile of kKeys keys, per warp of 16 query rows (fragments above).
// Scores: the rows' queries (a fragments) against the tile's keys, fp32, unscaled.
template <int kKeys>
__device__ __forceinline__ void tile_scores(float (&scores)[kKeys / 8][4], const unsigned (&query_fragments)[kChannelSteps][4],
                                            const __half (*key_tile)[kRowHalves], int g, int q) {
#pragma unroll
  for (int j = 0; j < kKeys / 8; ++j) {
    scores[j][0] = scores[j][1] = scores[j][2] = scores[j][3] = 0.0f;
#pragma unroll
    for (int s = 0; s < kChannelSteps; ++s) {
      const __half* key = &key_tile[8 * j + g][16 * s + 2 * q];
      mma_m16n8k16(scores[j], query_fragments[s][0], query_fragments[s][1], query_fragments[s][2],
                   query_fragments[s][3], load_pair(key), load_pair(key + 8));
    }
  }
}

// The online softmax over the tile's scaled scores (-inf where masked): each row's running max moves to the
// tile's, the running sum and the weighted sums are rescaled, and the scores become the weights. A row may
// have no valid score in the tile (past its length, or masked): its max stays, and the tile adds exact zeros.
template <int kKeys>
__device__ __forceinline__ void online_softmax_step(float (&scores)[kKeys / 8][4], float (&running_max)[2],
                                                    float (&running_sum)[2], float (&sums)[kValueBlocks][4]) {
  float tile_max[2] = {-INFINITY, -INFINITY};
#pragma unroll
  for (int j = 0; j < kKeys / 8; ++j)
#pragma unroll
    for (int e = 0; e < 4; ++e) tile_max[e / 2] = fmaxf(tile_max[e / 2], scores[j][e]);
  float rescale[2];
#pragma unroll
  for (int h = 0; h < 2; ++h) {
    // The 4 lanes of a row hold its scores.
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(kFullMask, tile_max[h], 1));
    tile_max[h] = fmaxf(tile_max[h], __shfl_xor_sync(kFullMask, tile_max[h], 2));
    const float new_max = fmaxf(running_max[h], tile_max[h]);
    rescale[h] = new_max == -INFINITY ? 1.0f : expf(running_max[h] - new_max);
    running_max[h] = new_max;
    running_sum[h] *= rescale[h];
  }
#pragma unroll
  for (int j = 0; j < kKeys / 8; ++j)
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
}

// sums += weights (16 x kKeys, fp16) x values (kKeys x 64 channels), 16 keys a k-step.
template <int kKeys>
__device__ __forceinline__ void add_weighted_values(float (&sums)[kValueBlocks][4], const float (&weights)[kKeys / 8][4],
                                                    const __half (*value_tile)[kRowHalves], int lane) {
#pragma unroll
  for (int s = 0; s < kKeys / 16; ++s) {
    const unsigned a0 = pack_halves(weights[2 * s][0], weights[2 * s][1]);
    const unsigned a1 = pack_halves(weights[2 * s][2], weights[2 * s][3]);
    const unsigned a2 = pack_halves(weights[2 * s + 1][0], weights[2 * s + 1][1]);
    const unsigned a3 = pack_halves(weights[2 * s + 1][2], weights[2 * s + 1][3]);
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
  start_after_inputs();
  // Two stages: the next tile's keys and values are copied while the warps compute on this one.
  __shared__ __align__(16) __half key_tile[2][kTileKeys][kRowHalves];
  __shared__ __align__(16) __half value_tile[2][kTileKeys][kRowHalves];
  __shared__ int key_index[2][kTileKeys];  // the tile's keys' rows in keys seen as [positions, key_width]; -1: masked
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

  // Thread t < 64 resolves key t of each tile: its table entry (kPerKey) is loaded a tile ahead of its use.
  const auto table_entry = [&](int j) {
    if constexpr (kPerKey) return j < key_count && threadIdx.x < kTileKeys ? table[j] : -1;
    return j;
  };
  const auto resolve_keys = [&](int stage, int first_key, int entry) {
    if (threadIdx.x < kTileKeys) {
      const int j = first_key + threadIdx.x;
      int index = j < key_count ? j : -1;
      if constexpr (kPerKey)
        index = index >= 0 && entry >= 0 && entry < args.key_batch ? entry * args.key_block + block_offset(j, args) : -1;
      key_index[stage][threadIdx.x] = index;
    }
  };
  if (key_count > 0) {
    resolve_keys(0, 0, table_entry(threadIdx.x));
    __syncthreads();
    stage_tiles(keys, values, key_base, key_index[0], args.key_width, key_tile[0], value_tile[0]);
  }
  int entry_ahead = table_entry(kTileKeys + threadIdx.x);
  int stage = 0;
  for (int first_key = 0; first_key < key_count; first_key += kTileKeys, stage ^= 1) {
    const int next_key = first_key + kTileKeys;
    if (next_key < key_count) {  // uniform over the block
      __syncthreads();  // every warp is done with the previous tile, which sat in the other stage
      resolve_keys(stage ^ 1, next_key, entry_ahead);
      entry_ahead = table_entry(next_key + kTileKeys + threadIdx.x);
      __syncthreads();
      stage_tiles(keys, values, key_base, key_index[stage ^ 1], args.key_width, key_tile[stage ^ 1],
                  value_tile[stage ^ 1]);
      wait_async_groups<1>();
    } else {
      wait_async_groups<0>();
    }
    __syncthreads();  // every thread's copies of this tile have landed

    float scores[kKeyBlocks][4];
    tile_scores<kTileKeys>(scores, query_fragments, key_tile[stage], g, q);
#pragma unroll
    for (int j = 0; j < kKeyBlocks; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = 8 * j + 2 * q + (e & 1);
        const bool valid = first_key + key < (e < 2 ? length_low : length_high) && key_index[stage][key] >= 0;
        scores[j][e] = valid ? scores[j][e] * args.scale : -INFINITY;
      }
    online_softmax_step<kTileKeys>(scores, running_max, running_sum, sums);
    add_weighted_values<kTileKeys>(sums, scores, value_tile[stage], lane);
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

// ---- grouped-query decoding: a row's query heads that share a kv head, on tensor cores ----
//
// A decode step (tq = 1) of a grouped-query model reads each kv head once per query head on CUDA cores (the
// warp decode kernel): at TinyLlama's 32 query heads over 4 kv heads, eight times. Here a block takes one
// (row, kv head): its `group` query heads are the rows of one mma (the rest zeros), and its 4 warps take
// every fourth 32-key tile of the row's keys, each with its own staged tiles and no block barrier in the
// loop; at the end the warps' running maxima, sums and weighted sums merge through shared memory in warp
// order. The split is fixed (not chosen by the batch), so a row's bits do not depend on the rows beside it.
// A warp's tiles are double-buffered: the next tile's keys and values are copied (cp.async) while it scores
// the current one, and the history table's entries for the tile after that are loaded a tile ahead, so that
// a step's keys stream instead of waiting on one round trip after another (at 64 rows and 520 keys the
// kernel read 1.1 TB/s while it loaded a tile at a time). The first tiles' table entries are read together
// with the row's length rather than after it: 19.6 -> 16.6 us a layer at 64 rows (H200).
constexpr int kDecodeWarps = 4;
constexpr int kDecodeThreads = 32 * kDecodeWarps;
constexpr int kDecodeTileKeys = 32;
constexpr int kDecodeKeyBlocks = kDecodeTileKeys / 8;
constexpr int kDecodeMaxGroup = 16;  // query heads per kv head: the mma's rows
constexpr int kDecodeStages = 2;
// A warp's staged tiles: kDecodeStages - 1 in flight while it computes on one. Two stages: at TinyLlama's
// shape (512-token prompts, H200) three and four took 17.7 and 25.9 us a layer against 16.6 at 64 rows (fewer
// blocks fit a multiprocessor), 12.8 and 12.6 against 12.9 at 16.
struct DecodeWarpTiles {
  __half keys[kDecodeStages][kDecodeTileKeys][kRowHalves];
  __half values[kDecodeStages][kDecodeTileKeys][kRowHalves];
  int index[kDecodeStages][kDecodeTileKeys];  // the keys' rows in keys seen as [positions, key_width]; -1: masked
};

// What a warp leaves for the merge: per mma row, its max, sum and weighted sums over its keys.
struct DecodeWarpResult {
  float max[kWarpQueries];
  float sum[kWarpQueries];
  float sums[kWarpQueries][kHeadDim];
};

// The warps' tiles while they read keys; their results once they are done (dynamic shared memory: past 48 KB).
union DecodeShared {
  DecodeWarpTiles tiles[kDecodeWarps];
  DecodeWarpResult results[kDecodeWarps];
};

template <bool kPerKey>
__global__ void __launch_bounds__(kDecodeThreads)
    attention_gqa_decode_kernel(const __half* __restrict__ query, const __half* __restrict__ keys,
                                const __half* __restrict__ values, const int32_t* __restrict__ key_lengths,
                                const int32_t* __restrict__ key_rows, __half* __restrict__ out,
                                AttentionArguments args, int kv_heads) {
  start_after_inputs();
  extern __shared__ __align__(16) unsigned char shared_memory[];
  constexpr int kStages = kDecodeStages;
  DecodeShared& shared = *reinterpret_cast<DecodeShared*>(shared_memory);
  const int row = blockIdx.x / kv_heads, kv_head = blockIdx.x % kv_heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32, g = lane / 4, q = lane % 4;
  DecodeWarpTiles& tile = shared.tiles[warp];
  int key_len = min(max(key_lengths[row], 0), args.key_capacity);
  int key_row = 0;
  if constexpr (!kPerKey) key_row = resolve_key_row(key_rows, row, args, key_len);
  const int32_t* table = kPerKey ? key_rows + static_cast<int64_t>(row) * args.key_capacity : nullptr;
  const int64_t key_base =
      static_cast<int64_t>(key_row) * args.key_block * args.key_width + static_cast<int64_t>(kv_head) * kHeadDim;

  // mma row g is query head kv_head * group + g (rows at or past the group, and 8-15 past 8, are zeros).
  const int group = args.group;
  const __half* query_row = query + static_cast<int64_t>(row) * args.width;
  const auto head_of = [&](int r) { return kv_head * group + r; };
  unsigned query_fragments[kChannelSteps][4];
#pragma unroll
  for (int s = 0; s < kChannelSteps; ++s) {
    const int c = 16 * s + 2 * q;
    const __half* low = query_row + head_of(g) * kHeadDim + c;
    const __half* high = query_row + head_of(g + 8) * kHeadDim + c;
    query_fragments[s][0] = g < group ? load_pair(low) : 0u;
    query_fragments[s][1] = g + 8 < group ? load_pair(high) : 0u;
    query_fragments[s][2] = g < group ? load_pair(low + 8) : 0u;
    query_fragments[s][3] = g + 8 < group ? load_pair(high + 8) : 0u;
  }

  float sums[kValueBlocks][4];
#pragma unroll
  for (int n = 0; n < kValueBlocks; ++n) sums[n][0] = sums[n][1] = sums[n][2] = sums[n][3] = 0.0f;
  float running_max[2] = {-INFINITY, -INFINITY}, running_sum[2] = {0.0f, 0.0f};

  // Key j's table entry (kPerKey), read before the row's length is known: the table holds key_capacity
  // entries a row, and an entry past the length (never written) is dropped by key_index.
  const auto table_entry = [&](int j) {
    if constexpr (kPerKey) return j < args.key_capacity ? table[j] : -1;
    return j;
  };
  // Key j's row in keys seen as [positions, key_width], or -1 (past the row's keys, or in no batch row).
  const auto key_index = [&](int j, int entry) {
    if (j >= key_len) return -1;
    if constexpr (kPerKey)
      return entry >= 0 && entry < args.key_batch ? entry * args.key_block + block_offset(j, args) : -1;
    return j;
  };
  // Copies the tile whose lane-th key has row `index` into stage `stage`, as one group of copies; zeros where
  // a key is masked (cache memory may hold NaN, and a weight of 0 times NaN would not vanish).
  const auto issue_tile = [&](int stage, int index) {
    tile.index[stage][lane] = index;
    __syncwarp();
    constexpr int kRowVectors = kHeadDim / 8;
#pragma unroll
    for (int i = lane; i < kDecodeTileKeys * kRowVectors; i += 32) {
      const int r = i / kRowVectors, c = (i % kRowVectors) * 8, row_index = tile.index[stage][r];
      const int64_t offset = row_index >= 0 ? key_base + static_cast<int64_t>(row_index) * args.key_width + c : 0;
      copy_async_16_or_zeros(&tile.keys[stage][r][c], keys + offset, row_index >= 0);
      copy_async_16_or_zeros(&tile.values[stage][r][c], values + offset, row_index >= 0);
    }
  };

  // The warp's tiles t = 0, 1, ... start at key warp * 32 + t * kStride; tile t sits in stage t % kStages,
  // and kStages - 1 tiles are in flight while the warp computes on one. Every iteration commits one group
  // (empty past the keys), so that waiting for all but the newest kStages - 1 groups means tile t landed.
  constexpr int kStride = kDecodeWarps * kDecodeTileKeys;
  const int warp_first = warp * kDecodeTileKeys;
  int entries[kStages];  // the lane-th keys' table entries of the first kStages tiles, loaded together
#pragma unroll
  for (int t = 0; t < kStages; ++t) entries[t] = table_entry(warp_first + t * kStride + lane);
#pragma unroll
  for (int t = 0; t < kStages - 1; ++t) {
    const int first = warp_first + t * kStride;
    if (first < key_len) issue_tile(t, key_index(first + lane, entries[t]));
    commit_async_copies();
  }
  int ahead = entries[kStages - 1];  // the entry of the next tile to issue, loaded an iteration early
  int stage = 0;
  for (int first_key = warp_first; first_key < key_len; first_key += kStride) {
    const int issue_first = first_key + (kStages - 1) * kStride;
    // That tile's stage was consumed at the end of the last iteration.
    if (issue_first < key_len) issue_tile((stage + kStages - 1) % kStages, key_index(issue_first + lane, ahead));
    commit_async_copies();
    ahead = table_entry(issue_first + kStride + lane);
    wait_async_groups<kStages - 1>();
    __syncwarp();  // every lane's copies of this tile have landed

    float scores[kDecodeKeyBlocks][4];
    tile_scores<kDecodeTileKeys>(scores, query_fragments, tile.keys[stage], g, q);
#pragma unroll
    for (int j = 0; j < kDecodeKeyBlocks; ++j)
#pragma unroll
      for (int e = 0; e < 4; ++e)
        scores[j][e] = tile.index[stage][8 * j + 2 * q + (e & 1)] >= 0 ? scores[j][e] * args.scale : -INFINITY;
    online_softmax_step<kDecodeTileKeys>(scores, running_max, running_sum, sums);
    add_weighted_values<kDecodeTileKeys>(sums, scores, tile.values[stage], lane);
    __syncwarp();  // the stage is consumed before the next iteration copies into it
    stage = stage + 1 == kStages ? 0 : stage + 1;
  }

#pragma unroll
  for (int h = 0; h < 2; ++h) {
    running_sum[h] += __shfl_xor_sync(kFullMask, running_sum[h], 1);
    running_sum[h] += __shfl_xor_sync(kFullMask, running_sum[h], 2);
  }
  __syncthreads();  // every warp is done with its tiles: the results take their place
  DecodeWarpResult& result = shared.results[warp];
  if (q == 0) {
    result.max[g] = running_max[0];
    result.sum[g] = running_sum[0];
    result.max[g + 8] = running_max[1];
    result.sum[g + 8] = running_sum[1];
  }
#pragma unroll
  for (int n = 0; n < kValueBlocks; ++n) {
    const int c = 8 * n + 2 * q;
    result.sums[g][c] = sums[n][0];
    result.sums[g][c + 1] = sums[n][1];
    result.sums[g + 8][c] = sums[n][2];
    result.sums[g + 8][c + 1] = sums[n][3];
  }
  __syncthreads();
  // Merge in warp order: thread t writes channels of head rows t / 64.. (group x 64 outputs).
  for (int i = threadIdx.x; i < group * kHeadDim; i += kDecodeThreads) {
    const int r = i / kHeadDim, c = i % kHeadDim;
    float max = -INFINITY;
#pragma unroll
    for (int w = 0; w < kDecodeWarps; ++w) max = fmaxf(max, shared.results[w].max[r]);
    float total = 0.0f, value = 0.0f;
    if (max != -INFINITY) {
#pragma unroll
      for (int w = 0; w < kDecodeWarps; ++w) {
        const float weight = expf(shared.results[w].max[r] - max);  // 0 for a warp that read no key
        total += shared.results[w].sum[r] * weight;
        value += shared.results[w].sums[r][c] * weight;
      }
    }
    // A row with no keys has no weights: zeros, like the CPU reference.
    out[static_cast<int64_t>(row) * args.width + head_of(r) * kHeadDim + c] =
        __float2half_rn(total > 0.0f ? value / total : 0.0f);
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
  launch_kernel(kernel, grid, kThreads, 0, stream, x.query, x.keys, x.values, x.key_lengths, x.key_rows, x.query_tiles,
                x.batch, x.out, args);
  return true;
}

bool launch_attention_gqa_decode(const TensorCoreAttention& x, const AttentionArguments& args, cudaStream_t stream) {
  const bool aligned = args.width % 8 == 0 && args.key_width % 8 == 0 && is_aligned(x.query, 16) &&
                       is_aligned(x.out, 16) && is_aligned(x.keys, 16) && is_aligned(x.values, 16);
  if (args.head_dim != kHeadDim || args.query_len != 1 || args.group < kGqaDecodeMinGroup ||
      args.group > kDecodeMaxGroup || !aligned)
    return false;
  const int kv_heads = x.heads / args.group;
  const int64_t blocks = int64_t{x.batch} * kv_heads;
  if (blocks > context().properties.maxGridSize[0]) return false;
  // A block a (row, kv head): few of them leave the GPU idle, where the CUDA-core kernel spreads a row's keys
  // over more warps. TinyLlama, 512-token prompts, 128 new, H200, ms a token against the CUDA-core kernel: 16
  // blocks (batch 4) 2.02 against 2.03, 32 blocks 2.09 against 2.12, 64 1.67 against 1.92, 128 2.00 against
  // 2.69. It runs from a block for every 8 multiprocessors. Batch-invariant mode keeps this kernel at any
  // batch: which kernel runs must not follow the batch.
  if (!batch_invariant() && 8 * blocks < context().properties.multiProcessorCount) return false;
  const auto kernel = x.per_key ? attention_gqa_decode_kernel<true> : attention_gqa_decode_kernel<false>;
  allow_shared_memory(kernel, sizeof(DecodeShared), "the grouped-query decode kernel");
  launch_kernel(kernel, static_cast<unsigned>(blocks), kDecodeThreads, sizeof(DecodeShared), stream, x.query, x.keys,
                x.values, x.key_lengths, x.key_rows, x.out, args, kv_heads);
  return true;
}

}  // namespace seqtrans::cuda
