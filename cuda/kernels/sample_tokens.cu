// sample_tokens: the sampling output layer, one block per row, so that no [rows, V] tensor leaves the
// device. The block reads its row several times (L2 holds it between passes) and recomputes scores and
// weights from the logits each time, with the arithmetic of core/sampling_math.h, so it draws the token
// the CPU op draws:
//  1. the best score, and the log-softmax normalizer of logits + bias (for the drawn token's log-prob);
//  2. top-k: the k-th largest score's key, by a radix select on token counts (three 11/11/10-bit passes);
//  3. top-p: of the weight S that top-k kept, the shortest run of tokens in (score down, id up) order that
//     weighs top_p_kept_mass(S). A histogram of weight over bins of score distance from the best (2,048
//     bins over the 30 nats that weigh anything: few tokens share a bin, so its atomics rarely collide, unlike
//     bins of the keys' top bits) finds the bin of the cut; its tokens, usually a handful, are ranked one
//     against another in shared memory. A bin of more tokens falls back to the radix select on weights,
//     then on ids among the tokens that share the cut key;
//  4. the weight every filter kept, and the draw: a block scan in id order finds the token whose
//     cumulative weight passes the draw's position. Sums are integers, so their order does not matter.
#include <cub/block/block_scan.cuh>

#include <climits>
#include <cstring>

#include "core/sampling_math.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/kernels/suppression.cuh"

namespace seqtrans::cuda {
namespace {

constexpr int kThreads = 512;
constexpr int kBins = 2048;  // 11-bit digits
constexpr int kBinsPerThread = kBins / kThreads;
constexpr int kScanItems = 4;  // consecutive ids per thread in the draw's scan
// Top-p's distance bins: kBins over the scores within 30 nats of the best (lighter tokens weigh 0). The bin
// of the cut is ranked in shared memory when it holds at most kCandidates tokens.
constexpr float kBinsPerNat = kBins / 30.0f;
constexpr int kCandidates = 256;

using Mass = unsigned long long;
using MassScan = cub::BlockScan<Mass, kThreads>;

// The digit a radix select pass chose: its bin, the weight in higher bins, the tokens in the bin.
struct DigitChoice {
  int digit;
  Mass above;
  unsigned count;
};

// What a select found: the key, the weight of larger keys and the tokens at the key (with weight).
struct Selection {
  uint32_t key;
  Mass above;
  unsigned count;
};

// Top-p's last kept token in (key down, id up) order, and the weight kept through it.
struct TopPCut {
  uint32_t key;
  int id;
  Mass kept;
};

struct SampleShared {
  Mass histogram[kBins];
  unsigned counts[kBins];
  typename MassScan::TempStorage scan;
  DigitChoice choice;
  uint32_t candidate_keys[kCandidates];
  int candidate_ids[kCandidates];
  Mass candidate_weights[kCandidates];
  unsigned candidate_count;
  TopPCut cut;
  Mass mass_scratch[32];
  float float_scratch[32];
  int drawn;
};

// One row: its logits, its masks and its scores (masked logits + bias over the temperature).
struct SampleRow {
  const float* logits;  // [vocab]
  const float* bias;    // [vocab] or null
  const uint32_t* suppressed;
  int banned_id;
  float temperature;
  float max_score = -INFINITY;  // known after the first pass

  __device__ float logit(int i) const {
    const float z = bias != nullptr ? add_rn(logits[i], bias[i]) : logits[i];
    return isnan(z) ? -INFINITY : z;
  }
  __device__ float score(int i) const {
    if (i == banned_id || is_suppressed(suppressed, i)) return -INFINITY;
    const float z = logit(i);
    return temperature == 1.0f ? z : divide_rn(z, temperature);
  }
  __device__ Mass weight(float score_value) const { return sampling_weight(add_rn(score_value, -max_score)); }
};

// What the filters keep: keys from top_k_key up; above cutoff_key, or at it with ids up to cutoff_id
// (top-p); weights from min_weight up (min-p). The defaults keep everything.
struct Filters {
  uint32_t top_k_key = 0;
  uint32_t cutoff_key = 0;
  int cutoff_id = INT_MAX;
  Mass min_weight = 0;

  __device__ bool keeps(uint32_t key, int i, Mass weight) const {
    return key >= top_k_key && (key > cutoff_key || (key == cutoff_key && i <= cutoff_id)) && weight >= min_weight;
  }
};

__device__ Mass block_sum_mass(Mass value, SampleShared& shared) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  __syncthreads();  // the scratch may still be read by a previous reduction
  if (lane == 0) shared.mass_scratch[warp] = value;
  __syncthreads();
  value = lane < kThreads / 32 ? shared.mass_scratch[lane] : 0;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

// The bin holding the rank-th unit of weight (rank from 1), bins scanned from the top.
__device__ DigitChoice find_digit(Mass rank, SampleShared& shared) {
  const int chunk = kThreads - 1 - static_cast<int>(threadIdx.x);  // thread 0 owns the top bins
  Mass local = 0;
#pragma unroll
  for (int b = 0; b < kBinsPerThread; ++b) local += shared.histogram[chunk * kBinsPerThread + b];
  Mass above = 0;
  MassScan(shared.scan).ExclusiveSum(local, above);
  if (above < rank && above + local >= rank) {
    for (int b = kBinsPerThread - 1; b >= 0; --b) {
      const int bin = chunk * kBinsPerThread + b;
      if (above + shared.histogram[bin] >= rank) {
        shared.choice = {bin, above, shared.counts[bin]};
        break;
      }
      above += shared.histogram[bin];
    }
  }
  __syncthreads();
  const DigitChoice choice = shared.choice;
  __syncthreads();
  return choice;
}

// The largest key K whose items, with the larger keys' items, weigh at least `rank`; key_weight(i, key,
// weight) gives item i's key and weight (weight 0 leaves it out).
template <typename KeyWeight>
__device__ Selection select_by_mass(int items, KeyWeight key_weight, Mass rank, SampleShared& shared) {
  uint32_t prefix = 0, high_mask = 0;
  Mass above = 0;
  unsigned count = 0;
  for (int pass = 0; pass < 3; ++pass) {
    const int shift = pass == 0 ? 21 : pass == 1 ? 10 : 0;
    const uint32_t digit_mask = pass == 2 ? 0x3ffu : 0x7ffu;
    for (int b = threadIdx.x; b < kBins; b += kThreads) {
      shared.histogram[b] = 0;
      shared.counts[b] = 0;
    }
    if (threadIdx.x == 0) shared.choice = {0, 0, 0};
    __syncthreads();
    for (int i = threadIdx.x; i < items; i += kThreads) {
      uint32_t key;
      Mass weight;
      key_weight(i, key, weight);
      if (weight == 0 || (key & high_mask) != prefix) continue;
      const int bin = static_cast<int>((key >> shift) & digit_mask);
      atomicAdd(&shared.histogram[bin], weight);
      atomicAdd(&shared.counts[bin], 1u);
    }
    __syncthreads();
    const DigitChoice choice = find_digit(rank - above, shared);
    prefix |= static_cast<uint32_t>(choice.digit) << shift;
    high_mask |= digit_mask << shift;
    above += choice.above;
    count = choice.count;
  }
  return {prefix, above, count};
}

// Top-p's cutoff among the tokens at or above top_k_key; returns the weight it keeps.
__device__ Mass find_top_p_cutoff(const SampleRow& row, int vocab, float top_p, Filters& filters,
                                  SampleShared& shared) {
  const uint32_t top_k_key = filters.top_k_key;
  // Bins in key order (the best score's bin is the last), so that find_digit ranks them from the top.
  const auto distance_bin = [&](float score) {
    const float distance = (row.max_score - score) * kBinsPerNat;
    return kBins - 1 - (distance < static_cast<float>(kBins - 1) ? static_cast<int>(distance) : kBins - 1);
  };
  for (int b = threadIdx.x; b < kBins; b += kThreads) {
    shared.histogram[b] = 0;
    shared.counts[b] = 0;
  }
  if (threadIdx.x == 0) {
    shared.choice = {0, 0, 0};
    shared.candidate_count = 0;
  }
  __syncthreads();
  Mass local = 0;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    const float score = row.score(i);
    if (order_key(score) < top_k_key) continue;
    const Mass weight = row.weight(score);
    if (weight == 0) continue;
    local += weight;
    const int bin = distance_bin(score);
    atomicAdd(&shared.histogram[bin], weight);
    atomicAdd(&shared.counts[bin], 1u);
  }
  const Mass total = block_sum_mass(local, shared);  // its barriers publish the histogram
  const Mass kept_mass = top_p_kept_mass(total, top_p);
  const DigitChoice bin = find_digit(kept_mass, shared);

  if (bin.count <= kCandidates) {
    for (int i = threadIdx.x; i < vocab; i += kThreads) {
      const float score = row.score(i);
      const uint32_t key = order_key(score);
      if (key < top_k_key) continue;
      const Mass weight = row.weight(score);
      if (weight == 0 || distance_bin(score) != bin.digit) continue;
      const unsigned slot = atomicAdd(&shared.candidate_count, 1u);
      shared.candidate_keys[slot] = key;
      shared.candidate_ids[slot] = i;
      shared.candidate_weights[slot] = weight;
    }
    __syncthreads();
    // Each token's rank: the weight of the bins above and of the bin's tokens before it in (key down, id
    // up) order. The one whose span holds kept_mass is the last kept.
    const int candidates = static_cast<int>(bin.count);
    for (int c = threadIdx.x; c < candidates; c += kThreads) {
      const uint32_t key = shared.candidate_keys[c];
      const int id = shared.candidate_ids[c];
      Mass before = bin.above;
      for (int other = 0; other < candidates; ++other) {
        const uint32_t other_key = shared.candidate_keys[other];
        if (other_key > key || (other_key == key && shared.candidate_ids[other] < id))
          before += shared.candidate_weights[other];
      }
      const Mass through = before + shared.candidate_weights[c];
      if (before < kept_mass && kept_mass <= through) shared.cut = {key, id, through};
    }
    __syncthreads();
    const TopPCut cut = shared.cut;
    filters.cutoff_key = cut.key;
    filters.cutoff_id = cut.id;
    return cut.kept;
  }

  const Selection cut = select_by_mass(
      vocab,
      [&](int i, uint32_t& key, Mass& weight) {
        const float score = row.score(i);
        key = order_key(score);
        weight = key >= top_k_key ? row.weight(score) : 0;
      },
      kept_mass, shared);
  filters.cutoff_key = cut.key;
  // Tokens at the cut key weigh the same: the first `needed` of them (lowest ids) stay.
  const Mass tied_weight = row.weight(key_score(cut.key));
  const Mass needed = (kept_mass - cut.above + tied_weight - 1) / tied_weight;
  if (needed >= cut.count) return cut.above + cut.count * tied_weight;
  const Selection last = select_by_mass(
      vocab,
      [&](int i, uint32_t& key, Mass& weight) {
        const bool tied = order_key(row.score(i)) == cut.key;
        key = 0xffffffffu - static_cast<uint32_t>(i);  // larger for lower ids
        weight = tied ? 1 : 0;
      },
      needed, shared);
  filters.cutoff_id = static_cast<int>(0xffffffffu - last.key);
  return cut.above + needed * tied_weight;
}

// The first id (in id order) whose cumulative kept weight exceeds `position`; -1 if none does.
template <typename KeptWeight>
__device__ int scan_draw(int vocab, KeptWeight kept_weight, Mass position, SampleShared& shared) {
  if (threadIdx.x == 0) shared.drawn = -1;
  Mass offset = 0;
  for (int tile = 0; tile < vocab; tile += kThreads * kScanItems) {
    const int first = tile + static_cast<int>(threadIdx.x) * kScanItems;
    Mass items[kScanItems];
    Mass local = 0;
#pragma unroll
    for (int e = 0; e < kScanItems; ++e) {
      items[e] = first + e < vocab ? kept_weight(first + e) : 0;
      local += items[e];
    }
    Mass before = 0, tile_total = 0;
    MassScan(shared.scan).ExclusiveSum(local, before, tile_total);
    before += offset;
    if (before <= position && position < before + local) {
#pragma unroll
      for (int e = 0; e < kScanItems; ++e) {
        if (position < before + items[e]) {
          shared.drawn = first + e;
          break;
        }
        before += items[e];
      }
    }
    __syncthreads();  // publishes the draw; the scan storage is free again
    if (shared.drawn >= 0) break;
    offset += tile_total;
  }
  return shared.drawn;
}

struct SampleArguments {
  const float* logits;         // [rows, vocab]
  const float* bias;           // [vocab] or null
  const uint32_t* suppressed;  // bitmap or null
  const int32_t* rows;         // [rows, kSamplingRowWords]
  int32_t* ids;                // [rows]
  float* log_probs;            // [rows]
  int vocab;
};

__global__ void __launch_bounds__(kThreads) sample_tokens_kernel(SampleArguments args) {
  start_after_inputs();
  __shared__ SampleShared shared;
  const int64_t row_index = blockIdx.x;
  const int vocab = args.vocab;
  ops::SamplingRow settings;
  memcpy(&settings, args.rows + row_index * ops::kSamplingRowWords, sizeof(settings));
  SampleRow row{args.logits + row_index * vocab, args.bias, args.suppressed, settings.banned_id,
                settings.temperature};

  // Pass 1: the best score, and logsumexp of the logits (masked ids included: HF normalizes first).
  float best = -INFINITY, logit_max = -INFINITY, logit_sum = 0.0f;
  for (int i = threadIdx.x; i < vocab; i += kThreads) {
    best = fmaxf(best, row.score(i));
    const float z = row.logit(i);
    if (z > logit_max) {
      logit_sum = logit_sum * expf(logit_max - z) + 1.0f;  // 0 * 0 while the max is still -inf
      logit_max = z;
    } else if (z != -INFINITY) {
      logit_sum += expf(z - logit_max);
    }
  }
  row.max_score = block_max(best, shared.float_scratch);
  const float row_logit_max = block_max(logit_max, shared.float_scratch);
  const float scaled = logit_max == -INFINITY ? 0.0f : logit_sum * expf(logit_max - row_logit_max);
  const float log_sum_exp = row_logit_max + logf(block_sum(scaled, shared.float_scratch));
  if (row.max_score == -INFINITY) {
    if (threadIdx.x == 0) {
      args.ids[row_index] = -1;
      args.log_probs[row_index] = -INFINITY;
    }
    return;
  }

  Filters filters;
  if (settings.top_k > 0 && settings.top_k < vocab) {
    filters.top_k_key = select_by_mass(
                            vocab,
                            [&](int i, uint32_t& key, Mass& weight) {
                              key = order_key(row.score(i));
                              weight = 1;
                            },
                            static_cast<Mass>(settings.top_k), shared)
                            .key;
  }
  // The kept weight: what top-p kept when min-p filters nothing more, else one more pass.
  Mass total = 0;
  if (settings.top_p < 1.0f) total = find_top_p_cutoff(row, vocab, settings.top_p, filters, shared);
  if (settings.min_p > 0.0f) filters.min_weight = min_p_weight(settings.min_p);

  const auto kept_weight = [&](int i) -> Mass {
    const float score = row.score(i);
    const Mass weight = row.weight(score);
    return filters.keeps(order_key(score), i, weight) ? weight : 0;
  };
  if (settings.top_p >= 1.0f || settings.min_p > 0.0f) {
    Mass local = 0;
    for (int i = threadIdx.x; i < vocab; i += kThreads) local += kept_weight(i);
    total = block_sum_mass(local, shared);
  }
  const uint64_t bits = sampling_bits(uint64_t{settings.seed_high} << 32 | settings.seed_low,
                                      uint64_t{settings.line_high} << 32 | settings.line_low, settings.step,
                                      settings.sample);
  const int drawn = scan_draw(vocab, kept_weight, draw_position(bits, total), shared);
  if (threadIdx.x == 0) {
    args.ids[row_index] = drawn;
    args.log_probs[row_index] = drawn < 0 ? -INFINITY : row.logit(drawn) - log_sum_exp;
  }
}

}  // namespace

void sample_tokens(const Tensor& logits, const Tensor& rows, const ops::SampleOptions& options, Tensor& ids,
                   Tensor& log_probs, cudaStream_t stream) {
  const char* op = "sample_tokens";
  check_on_device(op, "logits", logits);
  check_on_device(op, "rows", rows);
  check_on_device(op, "ids", ids);
  check_on_device(op, "log_probs", log_probs);
  check_same_dtype(op, "logits", logits, DataType::F32);
  const int64_t count = logits.dim(0), vocab = logits.dim(1);
  SEQTRANS_CHECK(count <= context().properties.maxGridSize[0], "{}: {} rows exceed the grid limit", op, count);
  if (options.bias != nullptr) {
    check_on_device(op, "bias", *options.bias);
    check_same_dtype(op, "bias", *options.bias, DataType::F32);
  }
  if (count == 0) return;
  const Tensor bitmap = launch_bitmap(op, options.suppressed_ids, options.suppressed_bitmap, vocab, stream);
  SampleArguments args;
  args.logits = logits.data<float>();
  args.bias = options.bias != nullptr ? options.bias->data<float>() : nullptr;
  args.suppressed = bitmap.defined() ? bitmap.data<uint32_t>() : nullptr;
  args.rows = rows.data<int32_t>();
  args.ids = ids.data<int32_t>();
  args.log_probs = log_probs.data<float>();
  args.vocab = static_cast<int>(vocab);
  launch_kernel(sample_tokens_kernel, static_cast<unsigned>(count), kThreads, 0, stream, args);
}

}  // namespace seqtrans::cuda
