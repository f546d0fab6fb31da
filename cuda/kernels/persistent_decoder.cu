// persistent_decoder_step: every layer of a decoder step over a few rows in one launch, post-norm (Marian) or
// pre-norm (mBART, M2M-100/NLLB).
//
// One block per multiprocessor stays resident for the whole step. A layer is eight phases (QKV, self-
// attention, its output projection, the cross-attention query, cross-attention, its output projection, the
// two FFN products); a grid-wide barrier replaces the kernel boundary between phases. Between arriving at a
// barrier and waiting on it, a block copies into shared memory what its next phase needs that no earlier
// phase of the step writes (its warps' weight rows, a norm's gamma and beta, an attention unit's older keys
// and values), so that after the barrier it waits only for the previous phase's outputs. Layer norm, bias,
// residual and activation are folded into the products: a product normalizes its input rows as it loads
// them (every block for itself: a few rows of d values), and its epilogue adds the bias and the residual.
// In fp16 from kTensorCoreRows rows on, the products are mma tiles (rows x 8 columns x 16 inputs): on CUDA
// cores every warp re-read each staged row per output column, two instructions per multiply-add.
// The barrier costs about 1.8 us on an H200, eight a layer: the design's floor (docs/BENCHMARKS.md). Rows
// read their older history through the beam reorder, and the kernel rewrites the history rows after its
// last barrier, so a step needs no reordered copy of the history. Greedy steps may also run the output layer
// after the last barrier (GreedyOutput: logits, normalizer and argmax, every block over its run of the
// vocabulary, the last block to finish merging).
//
// Post-norm, a product normalizes its input with the norm on the sublayer before's output, and that normalized
// row is the residual its sublayer adds back. Pre-norm, a product normalizes its input with its sublayer's own
// norm, and the sublayer adds its output to the stream, which stays in `sums` from the step's input on; the
// stack's final norm ends the step.
//
// Values are rounded to T where the op-by-op path stores a tensor between ops (queries, keys, values,
// attention outputs, layer norms, the FFN's hidden layer); sums before a layer norm stay in fp32 (pre-norm: the
// whole stream), and a product gets its bias and residual before rounding (the op-by-op path rounds it first):
// fp16 then stays as close to the fp32 reference as the op-by-op path, and fp32 equals it up to the order of
// additions.
#include <type_traits>

#include "core/sampling_math.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/kernels/suppression.cuh"

namespace seqtrans::cuda {
namespace {

// The kernel needs about 190 registers a thread: a block of 256 threads is what a multiprocessor holds.
constexpr int kThreads = 256;
constexpr int kWarps = kThreads / 32;
constexpr int kMaxRows = ops::kPersistentDecoderMaxRows;
constexpr int kMaxLayers = ops::kPersistentDecoderMaxLayers;
constexpr int kMaxHeadDim = 128;
// Output columns a warp computes in one product phase at most (the largest product has at most this many
// times the grid's warps columns).
constexpr int kMaxWarpColumns = 4;
// float4s of a row per lane in a layer norm: rows of at most 32 * 4 * 8 = 1,024 values.
constexpr int kNormQuads = 8;
// Tensor-core products (fp16): a work item is kItemColumns consecutive output columns over the whole input,
// the n of one mma.m16n8k16 whose m is the (at most 16) rows and k kMmaK inputs.
constexpr int kItemColumns = 8;
constexpr int kMmaK = 16;
// Elements of T after each staged row (inputs and weights) with tensor cores: rows then lie 16 bytes apart
// modulo 128, so the eight row addresses of an ldmatrix fall in different banks.
constexpr int kRowPad = 8;
// Floats of Shared::partials: a warp's four sums per lane.
constexpr int kPartialFloats = kWarps * 32 * 4;
// The products' kind: tensor cores for fp16 from kTensorCoreRows rows on, where shapes allow (their k-steps
// take 16 inputs). Below it, products on CUDA cores waste no work on rows that are not there.
constexpr int kTensorCoreRows = 3;
// The most rows of products on CUDA cores: fp16 steps of more rows run on tensor cores, or not in this
// kernel (persistent_decoder_fits); each row unrolled is code every step runs through (instruction-cache
// misses took 14% of a 1-row step when fp16 unrolled 16).
template <typename T>
constexpr int kCudaCoreRows = std::is_same_v<T, __half> ? kTensorCoreRows - 1 : kMaxRows;

template <typename T>
struct LayerPointers {
  const T *qkv_weight, *qkv_bias, *self_output_weight, *self_output_bias, *self_gamma, *self_beta;
  const T *cross_query_weight, *cross_query_bias, *cross_output_weight, *cross_output_bias, *cross_gamma,
      *cross_beta;
  const T *inner_weight, *inner_bias, *outer_weight, *outer_bias, *ffn_gamma, *ffn_beta;
  T *self_keys, *self_values;
  const T *cross_keys, *cross_values;
};

// One block's share of the vocabulary for one row, in the folded output layer: the normalizer of its logits
// (max and sum of exp(z - max)) and its best (order key, complemented id): the larger is better, ties go to
// the lower id, as in log_softmax_topk.
struct BestPartial {
  float max;
  float sum;
  unsigned long long best;
};

// The greedy output layer folded in (ops::PersistentGreedyOutput); weight null when the step ends at the norm.
template <typename T>
struct GreedyOutput {
  const T* weight;               // [vocab, width]
  const float* bias;             // [vocab] or null
  const uint32_t* suppressed;    // bitmap or null
  float* values;                 // [rows]
  int32_t* ids;                  // [rows]
  BestPartial* partials;         // [grid, rows], workspace
  unsigned* done;                // blocks done with their share, zero at launch (workspace)
  int vocab;
  bool streamed;                 // the weight is larger than half of L2: read evict-first
  int buffer_offset;             // bytes into dynamic shared memory of the weight chunks' ring
  int chunk_columns;             // weight rows a chunk holds (kLogitStages chunks in the ring)
};

// After the ring: the block's run of the bias (fp32, run_floats) and of the suppression bitmap's words, copied
// before the last barrier so that a column's epilogue waits on no load.
__host__ __device__ __forceinline__ int run_floats(int vocab, int grid) { return ((vocab + grid - 1) / grid + 3) / 4 * 4; }
__host__ __device__ __forceinline__ int run_words(int vocab, int grid) { return (vocab + grid - 1) / grid / 32 + 2; }

template <typename T>
struct Arguments {
  LayerPointers<T> layers[kMaxLayers];  // by value: a kernel parameter, no upload per step
  int num_layers;
  const T* input;  // [rows, d]: the embedded tokens
  T* output;       // [rows, d]
  // The step's inputs (DecoderStepInputs), [rows] int32 each, and the history table [history_rows,
  // history_capacity]: row r continues history row reorder[r] (r without a reorder), read during the step and
  // rewritten in place after its last barrier (prefix, then this step's entry).
  const int32_t *positions, *key_lengths, *memory_starts, *source_lengths, *cache_rows, *reorder;
  int32_t* history;
  int history_rows, history_capacity, cache_blocks, block_positions, memory_positions, source_span;
  // Workspace.
  T *query, *context, *hidden;  // [rows, d] x 2, [rows, ffn]
  float* sums;                           // [rows, d]: a sublayer's output plus its residual, before the norm
  unsigned* barrier;                     // zero at launch
  // Optional ([barriers + 2]): block 0's %globaltimer at the start, after each barrier and at the end, so
  // that the host can tell each phase's time (ops::kPersistentDecoderPhases).
  unsigned long long* trace;
  GreedyOutput<T> greedy;
  int rows, width, ffn, heads, head_dim, max_keys;
  int cache_keys;    // keys (and values) an attention unit copies into shared memory ahead of its barrier
  int work_floats;   // floats of shared.work
  int warp_weights;  // elements of a warp's weight slot: its most columns times the widest input
  float scale, epsilon;
  Activation activation;
  bool pre_norm;
  const T *final_gamma, *final_beta;  // pre-norm: the stack's final norm
};

// ---- the grid barrier ----

// Stamps trace[index] from block 0 (any block with `any_block`).
__device__ __forceinline__ void record_time(unsigned long long* trace, unsigned index, bool any_block = false) {
  if (trace == nullptr || (blockIdx.x != 0 && !any_block) || threadIdx.x != 0) return;
  unsigned long long now;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(now));
  trace[index] = now;
}

// The grid barrier, split: a block arrives as soon as its writes of a phase are done, copies what the next
// phase needs ahead, then waits. Every block arrives once per barrier; `target` counts the arrivals this
// block waits for (the same sequence in every block). The __syncthreads orders the block's writes before
// the release, and the acquire load makes the other blocks' visible.
__device__ __forceinline__ void arrive(unsigned* counter, unsigned& target) {
  target += gridDim.x;
  __syncthreads();
  if (threadIdx.x == 0) asm volatile("red.release.gpu.global.add.u32 [%0], %1;" ::"l"(counter), "r"(1u) : "memory");
}

__device__ __forceinline__ void wait_arrivals(const unsigned* counter, unsigned target, unsigned long long* trace) {
  if (threadIdx.x == 0) {
    unsigned seen;
    do {
      asm volatile("ld.acquire.gpu.global.u32 %0, [%1];" : "=r"(seen) : "l"(counter) : "memory");
    } while (seen < target);
    record_time(trace, target / gridDim.x);
  }
  __syncthreads();
}

// ---- asynchronous copies into shared memory (besides common.cuh's) ----

// The same, marked evict-first in L2: for a weight read once a step that is too large to stay in L2, so that
// it passes through without evicting what the next step reads again (the decoder's weights).
__device__ __forceinline__ void copy_async_16_evict_first(void* shared, const void* global) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile(
      "{\n\t.reg .b64 policy;\n\tcreatepolicy.fractional.L2::evict_first.b64 policy, 1.0;\n\t"
      "cp.async.cg.shared.global.L2::cache_hint [%0], [%1], 16, policy;\n\t}" ::"r"(address),
      "l"(global)
      : "memory");
}

// 4 bytes (through L1: the .cg form copies 16 only).
__device__ __forceinline__ void copy_async_4(void* shared, const void* global) {
  const unsigned address = static_cast<unsigned>(__cvta_generic_to_shared(shared));
  asm volatile("cp.async.ca.shared.global [%0], [%1], 4;" ::"r"(address), "l"(global) : "memory");
}

// ---- weight rows ----

// A phase's output columns are dealt to the grid's warps in turn; a warp owns at most kMaxWarpColumns of them
// and copies all of their weight rows into its own slot of shared memory before the phase's barrier, so that
// the products wait only for their input rows.
template <typename T>
__device__ void prefetch_rows(const T* weight, int in, int first, int stride, int out, T* slot) {
  constexpr int N = kVectorWidth<T>;
  const int lane = threadIdx.x % 32, vectors = in / N;
  for (int column = first, k = 0; column < out; column += stride, ++k)
    for (int v = lane; v < vectors; v += 32)
      copy_async_16(slot + static_cast<int64_t>(k) * in + v * N, weight + static_cast<int64_t>(column) * in + v * N);
}

// partial[r] += the lane's share of weight row `row` times input row r ([rows, in]), both in shared memory.
template <int kRows, typename T>
__device__ __forceinline__ void accumulate_row(const T* row, const T* inputs, int in, int rows,
                                               float (&partial)[kRows]) {
  constexpr int N = kVectorWidth<T>;
  const int vectors = in / N;
  for (int v = threadIdx.x % 32; v < vectors; v += 32) {
    const Vector<T, N> packed = reinterpret_cast<const Vector<T, N>*>(row)[v];
    float w[N];
#pragma unroll
    for (int e = 0; e < N; ++e) w[e] = to_float(packed.value[e]);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= rows) break;
      const Vector<T, N> x = reinterpret_cast<const Vector<T, N>*>(inputs + static_cast<int64_t>(r) * in)[v];
#pragma unroll
      for (int e = 0; e < N; ++e) partial[r] += w[e] * to_float(x.value[e]);
    }
  }
}

__device__ __forceinline__ float activate(Activation activation, float x) {
  switch (activation) {
    case Activation::Relu: return x > 0.0f ? x : 0.0f;
    case Activation::Gelu: return 0.5f * x * (1.0f + erff(x * 0.70710678118654752f));
    case Activation::GeluTanh: return 0.5f * x * (1.0f + tanhf(0.79788456080286536f * (x + 0.044715f * x * x * x)));
    case Activation::Swish: return x / (1.0f + expf(-x));
  }
  return x;
}

template <typename T>
__device__ __forceinline__ T round_to(float x) {
  return from_float<T>(x);
}

// ---- shared memory ----

// residual: [rows, d] of T, the rows the current sublayer adds back (the layer input, then each layer norm's
// output), kept by every block for itself; norm: gamma and beta of the norm being applied; work: a product's
// staged input rows (T: they hold values the op-by-op path stores as T, and half the bytes of fp32 halve the
// products' shared-memory reads), a layer norm's sums, or an attention unit's scratch; weights: each warp's
// weight rows (prefetch_rows).
struct Shared {
  void* residual;
  int residual_stride;  // elements of T from one residual row to the next
  float* norm;
  float* work;
  void* weights;    // [warps, warp_weights] of T: the weight rows of the current product
  float* partials;  // tensor-core products: [warps, 32, 4], each warp's share of its item's sums
  int* steps;       // [kStepRows, rows]: the step's inputs, read once at the start
  int* history;     // [history_capacity]: the history row of the block's first attention unit, likewise
};

// Rows of Shared::steps.
// kHistoryRow: the history row a row continues (Arguments::reorder), -1 where out of range.
enum StepRow { kPosition, kKeyLength, kMemoryStart, kSourceLength, kCacheRow, kHistoryRow, kStepRows };

// ---- phase inputs: a product's input rows ----


// A norm's gamma and beta into shared.norm (as T), asynchronously: they are weights, so a phase copies them
// before its barrier and stage_normalized waits for them.
template <typename T>
__device__ void prefetch_norm(const T* gamma, const T* beta, int width, const Shared& shared) {
  constexpr int N = kVectorWidth<T>;
  T* to = reinterpret_cast<T*>(shared.norm);
  for (int v = threadIdx.x; v < 2 * width / N; v += blockDim.x) {
    const bool is_gamma = v < width / N;
    copy_async_16(to + v * N, (is_gamma ? gamma : beta) + (is_gamma ? v : v - width / N) * N);
  }
}

template <typename T>
__device__ __forceinline__ float4 load_four(const T* from) {
  return make_float4(to_float(from[0]), to_float(from[1]), to_float(from[2]), to_float(from[3]));
}

// Loads in flight per thread while staging rows: a plain copy loop waits for each load before its shared
// store (the compiler cannot tell the two apart), one L2 round trip per element of the loop.
constexpr int kStageBatch = 4;

// Rows of T into `into`, `stride` elements apart (16-byte loads: `in` and `stride` are multiples of the vector
// width). Rows written earlier in this kernel: plain loads, never the read-only path.
template <typename T>
__device__ const T* stage_rows(const T* source, int rows, int in, T* into, int stride) {
  constexpr int N = kVectorWidth<T>;
  const int row_vectors = in / N, total = rows * row_vectors;
  const auto* vectors = reinterpret_cast<const Vector<T, N>*>(source);
  for (int base = threadIdx.x; base < total; base += blockDim.x * kStageBatch) {
    Vector<T, N> packed[kStageBatch];
#pragma unroll
    for (int b = 0; b < kStageBatch; ++b)
      if (base + b * static_cast<int>(blockDim.x) < total) packed[b] = vectors[base + b * blockDim.x];
#pragma unroll
    for (int b = 0; b < kStageBatch; ++b) {
      const int v = base + b * static_cast<int>(blockDim.x);
      if (v >= total) break;
      const int row = v / row_vectors;
      *reinterpret_cast<Vector<T, N>*>(into + static_cast<int64_t>(row) * stride + (v - row * row_vectors) * N) = packed[b];
    }
  }
  __syncthreads();
  return into;
}

// fp32 rows into `into`, likewise.
__device__ void stage_sums(const float* sums, int count, float* into) {
  const auto* vectors = reinterpret_cast<const float4*>(sums);
  auto* out = reinterpret_cast<float4*>(into);
  for (int base = threadIdx.x; base < count / 4; base += blockDim.x * kStageBatch) {
    float4 packed[kStageBatch];
#pragma unroll
    for (int b = 0; b < kStageBatch; ++b)
      if (base + b * static_cast<int>(blockDim.x) < count / 4) packed[b] = vectors[base + b * blockDim.x];
#pragma unroll
    for (int b = 0; b < kStageBatch; ++b)
      if (base + b * static_cast<int>(blockDim.x) < count / 4) out[base + b * blockDim.x] = packed[b];
  }
}

// Rows of T into `into` as floats (the pre-norm step's input, normalized as the sums are later).
template <typename T>
__device__ void stage_converted(const T* rows, int count, float* into) {
  auto* out = reinterpret_cast<float4*>(into);
  for (int q = threadIdx.x; q < count / 4; q += blockDim.x) out[q] = load_four(rows + 4 * q);
}

// layer_norm(sums) rounded to T (what the op-by-op path stores) into shared.residual: the next product's
// input (and, post-norm, the next sublayer's residual). `output` (block 0 only; the last layer's) gets it too.
// gamma and beta are in shared.norm already (prefetch_norm); a warp normalizes a row from registers.
// kLaterGroups: groups of copies committed after the norm's that it need not wait for (-1: wait for every
// copy). `rows`, where given, is normalized instead of the sums.
template <typename T, int kLaterGroups = -1>
__device__ const T* stage_normalized(const float* sums, const Arguments<T>& args, const Shared& shared, T* output,
                                     const T* rows = nullptr) {
  const int width = args.width, quads = width / 4;
  if (rows != nullptr)
    stage_converted(rows, args.rows * width, shared.work);
  else
    stage_sums(sums, args.rows * width, shared.work);
  if constexpr (kLaterGroups < 0)
    wait_async_copies();
  else
    wait_async_groups<kLaterGroups>();
  __syncthreads();
  const T* scale = reinterpret_cast<const T*>(shared.norm);
  const T* offset = scale + width;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  for (int r = warp; r < args.rows; r += kWarps) {
    const auto* row = reinterpret_cast<const float4*>(shared.work) + static_cast<int64_t>(r) * quads;
    float4 values[kNormQuads];
    float sum = 0.0f;
#pragma unroll
    for (int i = 0; i < kNormQuads; ++i) {
      if (lane + 32 * i >= quads) break;
      values[i] = row[lane + 32 * i];
      sum += (values[i].x + values[i].y) + (values[i].z + values[i].w);
    }
    const float mean = warp_sum(sum) / static_cast<float>(width);
    float squares = 0.0f;
#pragma unroll
    for (int i = 0; i < kNormQuads; ++i) {
      if (lane + 32 * i >= quads) break;
      const float a = values[i].x - mean, b = values[i].y - mean, c = values[i].z - mean, e = values[i].w - mean;
      squares += (a * a + b * b) + (c * c + e * e);
    }
    const float inverse_std = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(width) + args.epsilon);
    T* normalized = static_cast<T*>(shared.residual) + static_cast<int64_t>(r) * shared.residual_stride;
#pragma unroll
    for (int i = 0; i < kNormQuads; ++i) {
      const int q = lane + 32 * i;
      if (q >= quads) break;
      const float4 g = load_four(scale + 4 * q), b = load_four(offset + 4 * q);
      const T x = round_to<T>((values[i].x - mean) * inverse_std * g.x + b.x);
      const T y = round_to<T>((values[i].y - mean) * inverse_std * g.y + b.y);
      const T z = round_to<T>((values[i].z - mean) * inverse_std * g.z + b.z);
      const T w = round_to<T>((values[i].w - mean) * inverse_std * g.w + b.w);
      normalized[4 * q] = x, normalized[4 * q + 1] = y, normalized[4 * q + 2] = z, normalized[4 * q + 3] = w;
      if (output != nullptr) {
        T* to = output + static_cast<int64_t>(r) * width + 4 * q;
        to[0] = x, to[1] = y, to[2] = z, to[3] = w;
      }
    }
  }
  __syncthreads();
  return static_cast<const T*>(shared.residual);
}

// ---- a product phase ----

struct Product {
  int in, out;
};

// Arrives at the barrier (after the previous phase, `wait`), copies the warp's weight rows (and loads their
// biases) while the other blocks arrive, waits, stages the input rows
// (stage() returns them), then computes the warp's output columns and hands each column's biased dot
// products to epilogue(r, column, value). Loops over rows unroll to kRows (at least args.rows).
template <int kRows, typename T, typename Prefetch, typename Stage, typename Epilogue>
__device__ void product_phase(const T* weight, const T* bias, Product shape, const Arguments<T>& args,
                              const Shared& shared, unsigned& target, bool wait, Prefetch prefetch, Stage stage,
                              Epilogue epilogue) {
  const int warps = static_cast<int>(gridDim.x) * kWarps, warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int first = static_cast<int>(blockIdx.x) * kWarps + warp;
  if (wait) arrive(args.barrier, target);
  T* slot = static_cast<T*>(shared.weights) + static_cast<int64_t>(warp) * args.warp_weights;
  prefetch_rows(weight, shape.in, first, warps, shape.out, slot);
  float shifts[kMaxWarpColumns];
#pragma unroll
  for (int k = 0; k < kMaxWarpColumns; ++k) {
    const int column = first + k * warps;
    shifts[k] = column < shape.out ? to_float(bias[column]) : 0.0f;
  }
  prefetch();
  if (wait) wait_arrivals(args.barrier, target, args.trace);
  wait_async_copies();  // stage() ends at a block barrier, which publishes the copies to the warp
  const T* inputs = stage();
#pragma unroll
  for (int k = 0; k < kMaxWarpColumns; ++k) {
    const int column = first + k * warps;
    if (column >= shape.out) break;
    float partial[kRows];
#pragma unroll
    for (int r = 0; r < kRows; ++r) partial[r] = 0.0f;
    accumulate_row<kRows>(slot + static_cast<int64_t>(k) * shape.in, inputs, shape.in, args.rows, partial);
#pragma unroll
    for (int r = 0; r < kRows; ++r) {
      if (r >= args.rows) break;
      const float dot = warp_sum(partial[r]);
      if (lane == r) epilogue(r, column, dot + shifts[k]);
    }
  }
}

// ---- a product phase on tensor cores ----

// How a block shares a product's items: items are dealt to the blocks in turn; a block's warps form teams of
// `team`, one item each, and split its k-steps between them (all warps of a block are busy whenever it has
// an item; a team's sums are added in a fixed order, so they do not depend on timing). With more items
// than warps a warp takes several, one after another.
struct ItemShare {
  int items;                 // the block's items in this phase
  int team;                  // warps per item
  int item;                  // the warp's first item (then every kWarps / team-th)
  int part;                  // the warp's place in its team
  int first_step, end_step;  // its k-steps
};

__device__ __forceinline__ ItemShare share_items(Product shape) {
  const int all = shape.out / kItemColumns, block = static_cast<int>(blockIdx.x), grid = static_cast<int>(gridDim.x);
  const int warp = threadIdx.x / 32;
  ItemShare share;
  share.items = all > block ? (all - block + grid - 1) / grid : 0;
  share.team = share.items == 0 ? kWarps : max(kWarps / share.items, 1);
  share.item = warp / share.team;
  share.part = warp % share.team;
  const int steps = shape.in / kMmaK, per_part = (steps + share.team - 1) / share.team;
  share.first_step = min(share.part * per_part, steps);
  share.end_step = min(share.first_step + per_part, steps);
  return share;
}

// Elements of T a block's item takes in shared memory: its kItemColumns weight rows (padded), then their biases.
__host__ __device__ __forceinline__ int64_t item_elements(int in) {
  return static_cast<int64_t>(kItemColumns) * (in + kRowPad) + kItemColumns;
}

// The warp's share of its items' weight rows (and, for the team's first warp, their biases) into the block's
// item slots, asynchronously.
template <typename T>
__device__ void prefetch_items(const T* weight, const T* bias, Product shape, const ItemShare& share, T* slots) {
  constexpr int N = kVectorWidth<T>;
  const int lane = threadIdx.x % 32, stride = shape.in + kRowPad, first = share.first_step * kMmaK;
  const int vectors = (share.end_step - share.first_step) * kMmaK / N;
  for (int j = share.item; j < share.items; j += kWarps / share.team) {
    const int64_t column = (static_cast<int64_t>(j) * gridDim.x + blockIdx.x) * kItemColumns;
    T* slot = slots + j * item_elements(shape.in);
    for (int i = lane; i < kItemColumns * vectors; i += 32) {
      const int row = i / vectors, v = i % vectors;
      copy_async_16(slot + row * stride + first + v * N, weight + (column + row) * shape.in + first + v * N);
    }
    if (share.part == 0 && lane == 0) copy_async_16(slot + kItemColumns * stride, bias + column);
  }
}

// product_phase with the products on tensor cores (fp16). The staged input rows and the item slots are
// rows of `shape.in + kRowPad` elements; input rows past args.rows are multiplied as copies of the last
// and never handed to the epilogue.
template <typename T, typename Prefetch, typename Stage, typename Epilogue>
__device__ void product_phase_mma(const T* weight, const T* bias, Product shape, const Arguments<T>& args,
                                  const Shared& shared, unsigned& target, bool wait, Prefetch prefetch, Stage stage,
                                  Epilogue epilogue) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, stride = shape.in + kRowPad;
  const ItemShare share = share_items(shape);
  if (wait) arrive(args.barrier, target);
  T* slots = static_cast<T*>(shared.weights);
  prefetch_items(weight, bias, shape, share, slots);
  prefetch();
  if (wait) wait_arrivals(args.barrier, target, args.trace);
  wait_async_copies();  // stage() ends at a block barrier, which publishes the copies to the block
  const T* inputs = stage();
  // ldmatrix rows: lane l addresses row l % 8 of matrix l / 8. The input tile's matrices are rows 0-7 and
  // 8-15 of k 0-7, then of k 8-15; the weight tile's are its 8 rows at k 0-7 and 8-15.
  const int matrix = lane / 8;
  const T* input_row = inputs + min(lane % 8 + (matrix & 1) * 8, args.rows - 1) * stride + (matrix >> 1) * 8;
  const int weight_offset = (lane % 8) * stride + (matrix & 1) * 8;
  const int concurrent = kWarps / share.team, rounds = (share.items + concurrent - 1) / concurrent;
  for (int round = 0; round < rounds; ++round) {  // the same count in every warp of the block
    const int j = share.item + round * concurrent;
    const T* slot = slots + j * item_elements(shape.in);
    float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
    if (j < share.items) {
      for (int k = share.first_step; k < share.end_step; ++k) {
        unsigned a[4], b[2];
        load_matrices(a, input_row + k * kMmaK);
        load_matrices(b, slot + weight_offset + k * kMmaK);
        mma_m16n8k16(sums, a[0], a[1], a[2], a[3], b[0], b[1]);
      }
    }
    if (share.team > 1) {  // one round: a team's warps add up in its first warp, in order
      float* mine = shared.partials + (warp * 32 + lane) * 4;
#pragma unroll
      for (int e = 0; e < 4; ++e) mine[e] = sums[e];
      __syncthreads();
      if (share.part == 0)
        for (int p = 1; p < share.team; ++p)
#pragma unroll
          for (int e = 0; e < 4; ++e) sums[e] += mine[p * 32 * 4 + e];
    }
    if (j >= share.items || share.part != 0) continue;
    // The lane's sums: rows lane / 4 and lane / 4 + 8, columns 2 (lane % 4) and the next.
    const int pair = 2 * (lane % 4);
    const int column = (j * static_cast<int>(gridDim.x) + static_cast<int>(blockIdx.x)) * kItemColumns + pair;
    const T* biases = slot + kItemColumns * stride + pair;
#pragma unroll 1
    for (int e = 0; e < 4; ++e) {  // one copy of the epilogue; the sum picked without indexing (no local memory)
      const int r = lane / 4 + (e / 2) * 8;
      const float sum = e == 0 ? sums[0] : e == 1 ? sums[1] : e == 2 ? sums[2] : sums[3];
      if (r < args.rows) epilogue(r, column + e % 2, sum + to_float(biases[e % 2]));
    }
  }
}

// ---- attention ----

// Online softmax state of a set of keys: the largest score, the sum of exp(score - largest), and the weighted
// values; merge() folds in another set's state.
template <int N>
struct SoftmaxState {
  float largest = -INFINITY, total = 0.0f, sums[N] = {};

  __device__ __forceinline__ void merge(float other_largest, float other_total, const float (&other_sums)[N]) {
    const float top = fmaxf(largest, other_largest);
    const float shift = top == -INFINITY ? 0.0f : top;  // nothing seen yet on either side: weights 0, not NaN
    const float mine = expf(largest - shift), theirs = expf(other_largest - shift);
    total = total * mine + other_total * theirs;
#pragma unroll
    for (int e = 0; e < N; ++e) sums[e] = sums[e] * mine + other_sums[e] * theirs;
    largest = top;
  }
};

// One block per (row, head). A key row's vectors are spread over `vectors` lanes (a warp holds 32 / vectors
// keys at a time); each warp runs an online softmax over its keys, the key slots of a warp merge by
// shuffles and the warps through shared memory, once. key_of(r, j) gives key j's row in keys/values (-1:
// masked), key_count(r) the keys of row r, ready(r) how many of its first keys no earlier phase of this
// step writes: those are copied into shared memory before the barrier, while other blocks finish the
// previous phase (the block's first unit, up to args.cache_keys keys).
template <typename T, typename KeyOf, typename KeyCount, typename Ready>
__device__ void attention_phase(const T* keys, const T* values, const Arguments<T>& args, float* work,
                                unsigned& target, KeyOf key_of, KeyCount key_count, Ready ready) {
  constexpr int N = kVectorWidth<T>;
  const int head_dim = args.head_dim, width = args.width, vectors = head_dim / N, heads = args.heads;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const int part = lane % vectors, slot = lane / vectors, slots = 32 / vectors;  // vectors divides 32
  const int units = args.rows * heads;
  T* cached_keys = reinterpret_cast<T*>(work);  // [cache_keys, head_dim]
  T* cached_values = cached_keys + static_cast<int64_t>(args.cache_keys) * head_dim;
  float* query = reinterpret_cast<float*>(cached_values + static_cast<int64_t>(args.cache_keys) * head_dim);
  float* warp_states = query + kMaxHeadDim;  // [warps, head_dim + 2]: sums, then largest and total
  int* key_rows = reinterpret_cast<int*>(warp_states + kWarps * (kMaxHeadDim + 2));  // [max_keys]
  const auto row_of = [&](const T* cached, const T* global, int j, int key, int64_t head_offset) {
    return j < args.cache_keys ? cached + static_cast<int64_t>(j) * head_dim
                               : global + static_cast<int64_t>(key) * width + head_offset;
  };

  arrive(args.barrier, target);  // its __syncthreads: the block is done with the staged rows in `work`
  int cached = 0;
  if (static_cast<int>(blockIdx.x) < units) {
    const int r = blockIdx.x / heads;
    const int64_t head_offset = static_cast<int64_t>(blockIdx.x % heads) * head_dim;
    cached = min(min(ready(r), key_count(r)), args.cache_keys);
    for (int i = threadIdx.x; i < cached * vectors; i += kThreads) {
      const int j = i / vectors, v = i % vectors, key = key_of(r, j);
      if (v == 0) key_rows[j] = key;
      if (key < 0) continue;  // masked: never read
      const int64_t from = static_cast<int64_t>(key) * width + head_offset + v * N;
      copy_async_16(cached_keys + static_cast<int64_t>(j) * head_dim + v * N, keys + from);
      copy_async_16(cached_values + static_cast<int64_t>(j) * head_dim + v * N, values + from);
    }
  }
  wait_arrivals(args.barrier, target, args.trace);
  wait_async_copies();

  for (int unit = blockIdx.x; unit < units; unit += gridDim.x) {
    if (unit != static_cast<int>(blockIdx.x)) cached = 0;
    const int r = unit / heads;
    const int64_t head_offset = static_cast<int64_t>(unit % heads) * head_dim;
    const int count = key_count(r);
    // The keys the previous phases wrote (this step's own key) join the cached ones, loaded with the query in
    // one round trip.
    const int cache_end = min(count, args.cache_keys);
    for (int i = threadIdx.x; i < (cache_end - cached) * vectors; i += kThreads) {
      const int j = cached + i / vectors, v = i % vectors, key = key_of(r, j);
      if (v == 0) key_rows[j] = key;
      if (key < 0) continue;
      const int64_t from = static_cast<int64_t>(key) * width + head_offset + v * N;
      *reinterpret_cast<Vector<T, N>*>(cached_keys + static_cast<int64_t>(j) * head_dim + v * N) =
          *reinterpret_cast<const Vector<T, N>*>(keys + from);
      *reinterpret_cast<Vector<T, N>*>(cached_values + static_cast<int64_t>(j) * head_dim + v * N) =
          *reinterpret_cast<const Vector<T, N>*>(values + from);
    }
    if (threadIdx.x < head_dim) query[threadIdx.x] = to_float(args.query[static_cast<int64_t>(r) * width + head_offset + threadIdx.x]);
    __syncthreads();  // also publishes every thread's asynchronous copies
    float q[N];
#pragma unroll
    for (int e = 0; e < N; ++e) q[e] = query[part * N + e];
    SoftmaxState<N> state;
    for (int first = warp * slots; first < count; first += kWarps * slots) {
      const int j = first + slot;
      const int key = j >= count ? -1 : j < cache_end ? key_rows[j] : key_of(r, j);
      Vector<T, N> k{}, v{};
      if (key >= 0) {  // masked keys may not exist: never read
        k = reinterpret_cast<const Vector<T, N>*>(row_of(cached_keys, keys, j, key, head_offset))[part];
        v = reinterpret_cast<const Vector<T, N>*>(row_of(cached_values, values, j, key, head_offset))[part];
      }
      float dot = 0.0f;
#pragma unroll
      for (int e = 0; e < N; ++e) dot += q[e] * to_float(k.value[e]);
      for (int offset = vectors / 2; offset > 0; offset /= 2) dot += __shfl_xor_sync(kFullMask, dot, offset);
      const float score = key >= 0 ? dot * args.scale : -INFINITY;
      float one[N];
#pragma unroll
      for (int e = 0; e < N; ++e) one[e] = to_float(v.value[e]);
      state.merge(score, key >= 0 ? 1.0f : 0.0f, one);
    }
    // The warp's key slots into slot 0, then the warps into the first head_dim threads.
    for (int offset = vectors; offset < 32; offset *= 2) {
      float sums[N];
#pragma unroll
      for (int e = 0; e < N; ++e) sums[e] = __shfl_xor_sync(kFullMask, state.sums[e], offset);
      const float largest = __shfl_xor_sync(kFullMask, state.largest, offset);
      const float total = __shfl_xor_sync(kFullMask, state.total, offset);
      state.merge(largest, total, sums);
    }
    float* mine = warp_states + warp * (kMaxHeadDim + 2);
    if (slot == 0) {
#pragma unroll
      for (int e = 0; e < N; ++e) mine[part * N + e] = state.sums[e];
      if (part == 0) mine[kMaxHeadDim] = state.largest, mine[kMaxHeadDim + 1] = state.total;
    }
    __syncthreads();
    if (threadIdx.x < head_dim) {
      SoftmaxState<1> all;
      for (int w = 0; w < kWarps; ++w) {
        const float* theirs = warp_states + w * (kMaxHeadDim + 2);
        const float sums[1] = {theirs[threadIdx.x]};
        all.merge(theirs[kMaxHeadDim], theirs[kMaxHeadDim + 1], sums);
      }
      const float inverse = all.total > 0.0f ? 1.0f / all.total : 0.0f;  // no key: a zero row
      args.context[static_cast<int64_t>(r) * width + head_offset + threadIdx.x] = round_to<T>(all.sums[0] * inverse);
    }
    __syncthreads();  // the next unit reuses the scratch
  }
}

// ---- the output layer, folded in (greedy search) ----

// The output weight streams through shared memory in chunks of whole rows, kLogitStages of them in a ring:
// while a block multiplies one chunk, the next ones are on their way (about 60 KB in flight per
// multiprocessor; the phase measured 1.6 TB/s on an H100, docs/BENCHMARKS.md). A chunk holds at most
// kLogitChunkBytes.
constexpr int kLogitStages = 3;
constexpr int kLogitChunkBytes = 32 * 1024;
// The fewest rows a chunk may hold: below it the ring is too small to keep the memory busy.
constexpr int kLogitMinChunkColumns = 8;

// The block's run of the vocabulary: [first, end).
struct VocabularyRun {
  int first, end;
};

__device__ __forceinline__ VocabularyRun block_vocabulary(int vocab) {
  const int per_block = (vocab + static_cast<int>(gridDim.x) - 1) / static_cast<int>(gridDim.x);
  const int first = min(static_cast<int>(blockIdx.x) * per_block, vocab);
  return {first, min(first + per_block, vocab)};
}

// The block's run of the bias and bitmap words into `extras` (run_floats floats, then the words),
// asynchronously.
template <typename T>
__device__ void prefetch_logit_extras(const GreedyOutput<T>& out, float* extras) {
  const VocabularyRun run = block_vocabulary(out.vocab);
  if (out.bias != nullptr)
    for (int i = threadIdx.x; i < run.end - run.first; i += blockDim.x) copy_async_4(extras + i, out.bias + run.first + i);
  if (out.suppressed != nullptr && run.end > run.first) {
    auto* words = reinterpret_cast<uint32_t*>(extras + run_floats(out.vocab, static_cast<int>(gridDim.x)));
    const int first_word = run.first / 32, last_word = (run.end - 1) / 32;
    for (int w = first_word + static_cast<int>(threadIdx.x); w <= last_word; w += blockDim.x)
      copy_async_4(words + w - first_word, out.suppressed + w);
  }
}

// Chunk `chunk` of the block's run into its slot of the ring, as one group of asynchronous copies (an empty
// group past the run's end, so that every thread commits the same sequence).
template <typename T>
__device__ void prefetch_logit_chunk(const GreedyOutput<T>& out, int width, T* ring, int chunk) {
  constexpr int N = kVectorWidth<T>;
  const VocabularyRun run = block_vocabulary(out.vocab);
  const int first = run.first + chunk * out.chunk_columns, vectors = width / N;
  const int count = max(0, min(out.chunk_columns, run.end - first));
  T* slot = ring + static_cast<int64_t>(chunk % kLogitStages) * out.chunk_columns * width;
  const T* from = out.weight + static_cast<int64_t>(first) * width;
  if (out.streamed) {
    for (int i = threadIdx.x; i < count * vectors; i += blockDim.x) copy_async_16_evict_first(slot + i * N, from + i * N);
  } else {
    for (int i = threadIdx.x; i < count * vectors; i += blockDim.x) copy_async_16(slot + i * N, from + i * N);
  }
  commit_async_copies();
}

__device__ __forceinline__ unsigned long long best_key(float z, bool suppressed, int id) {
  const uint32_t key = order_key(suppressed ? -INFINITY : z);
  return (static_cast<unsigned long long>(key) << 32) | (0xffffffffu - static_cast<uint32_t>(id));
}

// a += b, normalizers and best keys (either may be empty: max -inf, sum 0).
__device__ __forceinline__ void merge_best(BestPartial& a, const BestPartial& b) {
  const float top = fmaxf(a.max, b.max);
  if (top != -INFINITY)
    a.sum = (a.max == -INFINITY ? 0.0f : a.sum * expf(a.max - top)) + (b.max == -INFINITY ? 0.0f : b.sum * expf(b.max - top));
  a.max = top;
  a.best = max(a.best, b.best);
}

// Threads sharing one weight row's dot product in the folded output layer: eight lanes read 128 contiguous
// bytes of the row at a time, and a chunk's rows are all multiplied at once (a thread per row would leave
// most of the block idle; a warp per row spent its time reducing).
constexpr int kRowThreads = 8;

__device__ __forceinline__ unsigned long long block_max_key(unsigned long long value, unsigned long long* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = max(value, __shfl_xor_sync(kFullMask, value, offset));
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < kWarps ? scratch[lane] : 0ull;
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = max(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

// The block's partial of one row from its threads' (max, sum of exp(z - max), best key): every thread gets it.
__device__ __forceinline__ BestPartial block_best(const BestPartial& mine, float* scratch, unsigned long long* keys) {
  const float top = block_max(mine.max, scratch);
  const float scaled = mine.max == -INFINITY ? 0.0f : mine.sum * expf(mine.max - top);
  return BestPartial{top, block_sum(scaled, scratch), block_max_key(mine.best, keys)};
}

// After the last layer's norm (the block's normalized rows in shared.residual, the ring's first chunks
// requested before the last barrier): the block's run of the vocabulary chunk by chunk, kRowThreads threads
// per weight row, its logits z = x w + bias into shared memory; then a thread per logit for the block's
// normalizer and best key per row; the last block to finish merges the grid's partials (fixed trees: every
// replay gives the same sums) into each row's best id and its log-prob.
template <int kRows, typename T>
__device__ void select_best_tokens(const Arguments<T>& args, const Shared& shared, T* ring, float* extras,
                                   unsigned final_stamp) {
  constexpr int N = kVectorWidth<T>;
  __shared__ float scratch[32];
  __shared__ unsigned long long keys[32];
  const GreedyOutput<T>& out = args.greedy;
  const int d = args.width, rows = args.rows, vectors = d / N, grid = static_cast<int>(gridDim.x);
  const VocabularyRun run = block_vocabulary(out.vocab);
  const int length = run.end - run.first, stride = run_floats(out.vocab, grid);
  const int chunks = (length + out.chunk_columns - 1) / out.chunk_columns;
  const auto* words = reinterpret_cast<const uint32_t*>(extras + stride);
  float* logits = extras + stride + run_words(out.vocab, grid);  // [rows, stride]
  const T* inputs = static_cast<const T*>(shared.residual);
  const int part = threadIdx.x % kRowThreads, team = threadIdx.x / kRowThreads;
  const unsigned team_mask = 0xffu << (threadIdx.x % 32 / kRowThreads * kRowThreads);
  for (int chunk = 0; chunk < chunks; ++chunk) {
    prefetch_logit_chunk(out, d, ring, chunk + kLogitStages - 1);
    wait_async_groups<kLogitStages - 1>();  // this thread's copies of `chunk` have landed
    __syncthreads();                         // and everyone's
    const T* slot = ring + static_cast<int64_t>(chunk % kLogitStages) * out.chunk_columns * d;
    const int first = chunk * out.chunk_columns, count = min(out.chunk_columns, length - first);
    for (int j = team; j < count; j += kThreads / kRowThreads) {
      float partial[kRows];
#pragma unroll
      for (int r = 0; r < kRows; ++r) partial[r] = 0.0f;
      const auto* weights = reinterpret_cast<const Vector<T, N>*>(slot + static_cast<int64_t>(j) * d);
      for (int v = part; v < vectors; v += kRowThreads) {
        const Vector<T, N> w = weights[v];
#pragma unroll
        for (int r = 0; r < kRows; ++r) {
          if (r >= rows) break;
          const Vector<T, N> x = reinterpret_cast<const Vector<T, N>*>(inputs + static_cast<int64_t>(r) * d)[v];
#pragma unroll
          for (int e = 0; e < N; ++e) partial[r] += to_float(w.value[e]) * to_float(x.value[e]);
        }
      }
      const float shift = out.bias != nullptr ? extras[first + j] : 0.0f;
#pragma unroll
      for (int r = 0; r < kRows; ++r) {
        if (r >= rows) break;
        float sum = partial[r];
#pragma unroll
        for (int offset = kRowThreads / 2; offset > 0; offset /= 2) sum += __shfl_xor_sync(team_mask, sum, offset);
        if (part == 0) logits[r * stride + first + j] = sum + shift;
      }
    }
    __syncthreads();  // the slot is read before a later prefetch reuses it
  }
  wait_async_copies();  // the empty groups past the run
  // The block's partial per row, a thread per logit.
  for (int r = 0; r < rows; ++r) {
    BestPartial mine{-INFINITY, 0.0f, 0};
    for (int i = threadIdx.x; i < length; i += kThreads) {
      const int column = run.first + i;
      const bool suppressed =
          out.suppressed != nullptr && ((words[column / 32 - run.first / 32] >> (column % 32)) & 1u) != 0;
      merge_best(mine, BestPartial{logits[r * stride + i], 1.0f, best_key(logits[r * stride + i], suppressed, column)});
    }
    const BestPartial block = block_best(mine, scratch, keys);
    if (threadIdx.x == 0) out.partials[blockIdx.x * rows + r] = block;
  }
  __threadfence();  // the partials before the count that tells the last block to read them
  __shared__ bool last;
  __syncthreads();
  if (threadIdx.x == 0) last = atomicAdd(out.done, 1u) == gridDim.x - 1;
  __syncthreads();
  if (!last) return;
  __threadfence();
  for (int r = 0; r < rows; ++r) {
    BestPartial mine{-INFINITY, 0.0f, 0};
    for (int b = threadIdx.x; b < grid; b += kThreads) {
      const BestPartial* from = out.partials + b * rows + r;
      merge_best(mine, BestPartial{__ldcg(&from->max), __ldcg(&from->sum), __ldcg(&from->best)});
    }
    const BestPartial all = block_best(mine, scratch, keys);
    if (threadIdx.x == 0) {
      const float z = key_score(static_cast<uint32_t>(all.best >> 32));
      const float log_sum_exp = all.max == -INFINITY ? -INFINITY : all.max + logf(all.sum);
      out.values[r] = z == -INFINITY ? z : z - log_sum_exp;
      out.ids[r] = static_cast<int32_t>(0xffffffffu - static_cast<uint32_t>(all.best));
    }
  }
  record_time(args.trace, final_stamp, /*any_block=*/true);
}

// ---- the kernel ----

// kTensorCores: the products run as mma tiles (fp16 only; staged rows are then padded by kRowPad).
template <typename T, bool kTensorCores>
__global__ void __launch_bounds__(kThreads, 1) persistent_decoder_kernel(const __grid_constant__ Arguments<T> args) {
  extern __shared__ float shared_memory[];
  constexpr int pad = kTensorCores ? kRowPad : 0;
  const int d = args.width, rows = args.rows;
  // The residual rows take rows * (d + pad) elements of T; what follows stays 16-byte aligned (d is a
  // multiple of 8, and of 16 with tensor cores).
  float* norm = shared_memory + rows * (d + pad) * static_cast<int>(sizeof(T)) / 4;
  float* work = norm + 2 * d;
  T* weights = reinterpret_cast<T*>(work + args.work_floats);
  float* partials = reinterpret_cast<float*>(weights + static_cast<int64_t>(kWarps) * args.warp_weights);
  int* steps = reinterpret_cast<int*>(partials + (kTensorCores ? kPartialFloats : 0));
  unsigned target = 0;  // arrivals this block waits for at the next barrier (arrive / wait_arrivals)
  const Shared shared{shared_memory, d + pad, norm, work, weights, partials, steps, steps + kStepRows * rows};
  // A product phase on the kernel's kind of products (same arguments as product_phase).
  const auto product = [&](const T* weight, const T* bias, Product shape, bool wait, auto prefetch, auto stage,
                           auto epilogue) {
    if constexpr (kTensorCores)
      product_phase_mma(weight, bias, shape, args, shared, target, wait, prefetch, stage, epilogue);
    else
      product_phase<kCudaCoreRows<T>>(weight, bias, shape, args, shared, target, wait, prefetch, stage, epilogue);
  };
  // The step's inputs, and the older history of the block's first attention unit (its row's positions so
  // far): constant during the step, so read once, and the attention phases copy keys ahead without waiting.
  for (int i = threadIdx.x; i < rows; i += blockDim.x) {
    steps[kPosition * rows + i] = args.positions[i];
    steps[kKeyLength * rows + i] = args.key_lengths[i];
    steps[kMemoryStart * rows + i] = args.memory_starts[i];
    steps[kSourceLength * rows + i] = args.source_lengths[i];
    steps[kCacheRow * rows + i] = args.cache_rows[i];
    const int from = args.reorder != nullptr ? args.reorder[i] : i;
    steps[kHistoryRow * rows + i] = from >= 0 && from < args.history_rows ? from : -1;
  }
  __syncthreads();
  const auto step = [&](StepRow which, int r) { return steps[which * rows + r]; };
  // Row r's older history: the first min(position, capacity) entries of the row it continues.
  const auto older_history = [&](int r) -> const int32_t* {
    const int from = step(kHistoryRow, r);
    return from < 0 ? nullptr : args.history + static_cast<int64_t>(from) * args.history_capacity;
  };
  const auto older_count = [&](int r) {
    return older_history(r) == nullptr ? 0 : min(max(step(kPosition, r), 0), args.history_capacity);
  };
  // A row's older history into shared.history (the block's first attention unit's, then the row it rewrites).
  const auto stage_history = [&](int r) {
    for (int j = threadIdx.x; j < older_count(r); j += blockDim.x) shared.history[j] = older_history(r)[j];
  };
  const int history_row = static_cast<int>(blockIdx.x) < rows * args.heads ? static_cast<int>(blockIdx.x) / args.heads : -1;
  if (history_row >= 0) stage_history(history_row);
  __syncthreads();
  record_time(args.trace, 0);
  const Product square{d, d}, qkv_shape{d, 3 * d}, inner_shape{d, args.ffn}, outer_shape{args.ffn, d};
  // A sublayer's end: its product plus the bias (in `value`) and the residual, kept in fp32. Post-norm the
  // residual is the normalized row the product read (shared.residual); pre-norm it is the stream: the step's
  // input for the first sublayer, then the sums themselves (in place: a phase's thread alone reads and writes
  // its element).
  const auto end_sublayer = [&](bool first_sublayer) {
    return [&, first_sublayer](int r, int column, float value) {
      const int64_t i = static_cast<int64_t>(r) * d + column;
      const float residual =
          !args.pre_norm ? to_float(static_cast<const T*>(shared.residual)[static_cast<int64_t>(r) * shared.residual_stride + column])
          : first_sublayer ? to_float(args.input[i])
                           : args.sums[i];
      args.sums[i] = value + residual;
    };
  };
  // The norm a product's input goes through, into shared.norm: post-norm the one on the sublayer before's
  // output (none before the first layer), pre-norm the sublayer's own.
  const auto prefetch_own_or = [&](const T* own_gamma, const T* own_beta, const T* before_gamma, const T* before_beta) {
    if (args.pre_norm)
      prefetch_norm(own_gamma, own_beta, d, shared);
    else if (before_gamma != nullptr)
      prefetch_norm(before_gamma, before_beta, d, shared);
  };
  T* staged = reinterpret_cast<T*>(shared.work);
  const auto stage_context = [&] { return stage_rows(args.context, rows, d, staged, d + pad); };
  const auto nothing = [] {};
  // Key j of row r in the self-attention cache: through the history table, except this step's own key, whose
  // block is the row's cache row (what the QKV phase writes into the history; reading it there would wait on
  // one more round trip).
  const auto self_key = [&](int r, int j) {
    const int position = step(kPosition, r);
    const int block = j >= position              ? (position < args.history_capacity ? step(kCacheRow, r) : -1)
                      : older_history(r) == nullptr ? -1
                      : r == history_row         ? shared.history[j]
                                                 : older_history(r)[j];
    return block >= 0 && block < args.cache_blocks ? block * args.block_positions + j % args.block_positions : -1;
  };
  const auto memory_key = [&](int r, int j) { return step(kMemoryStart, r) + j; };
  const auto memory_count = [&](int r) {
    const int start = step(kMemoryStart, r);
    if (start < 0 || start >= args.memory_positions) return 0;
    return min(min(max(step(kSourceLength, r), 0), args.source_span), args.memory_positions - start);
  };

  for (int l = 0; l < args.num_layers; ++l) {
    const LayerPointers<T>& layer = args.layers[l];
    // QKV from the layer's input: the query to `query`, the key and value to the cache block of the row's
    // position.
    const auto prefetch_input = [&] {
      prefetch_own_or(layer.self_gamma, layer.self_beta, l > 0 ? args.layers[l - 1].ffn_gamma : nullptr,
                      l > 0 ? args.layers[l - 1].ffn_beta : nullptr);
    };
    const auto stage_input = [&] {
      if (l > 0) return stage_normalized<T>(args.sums, args, shared, nullptr);
      if (args.pre_norm) return stage_normalized<T>(nullptr, args, shared, nullptr, args.input);
      return stage_rows(args.input, rows, d, static_cast<T*>(shared.residual), d + pad);
    };
    product(layer.qkv_weight, layer.qkv_bias, qkv_shape, l > 0, prefetch_input, stage_input,
                  [&](int r, int column, float biased) {
                    const T value = round_to<T>(biased);
                    if (column < d) {
                      args.query[static_cast<int64_t>(r) * d + column] = value;
                      return;
                    }
                    const int position = step(kPosition, r), block = step(kCacheRow, r);
                    if (position < 0 || position >= args.history_capacity || block < 0 || block >= args.cache_blocks)
                      return;
                    const int64_t entry =
                        static_cast<int64_t>(block) * args.block_positions + position % args.block_positions;
                    if (column < 2 * d) {
                      layer.self_keys[entry * d + column - d] = value;
                    } else {
                      layer.self_values[entry * d + column - 2 * d] = value;
                    }
                  });
    // Self-attention over the row's keys through the history table: those before its position are older
    // than this step.
    attention_phase(
        layer.self_keys, layer.self_values, args, shared.work, target, self_key,
        [&](int r) { return min(max(step(kKeyLength, r), 0), args.history_capacity); },
        [&](int r) { return max(step(kPosition, r), 0); });
    product(layer.self_output_weight, layer.self_output_bias, square, true, nothing, stage_context,
            end_sublayer(l == 0));
    // Cross-attention's query from the normalized sums.
    product(
        layer.cross_query_weight, layer.cross_query_bias, square, true,
        [&] { prefetch_own_or(layer.cross_gamma, layer.cross_beta, layer.self_gamma, layer.self_beta); },
        [&] { return stage_normalized<T>(args.sums, args, shared, nullptr); },
        [&](int r, int column, float biased) { args.query[static_cast<int64_t>(r) * d + column] = round_to<T>(biased); });
    // Cross-attention over the row's run of the memory pool, all of it written before the step.
    attention_phase(layer.cross_keys, layer.cross_values, args, shared.work, target, memory_key, memory_count,
                    memory_count);
    product(layer.cross_output_weight, layer.cross_output_bias, square, true, nothing, stage_context,
            end_sublayer(false));
    // The feed-forward block: normalized sums -> activation -> back to d.
    product(
        layer.inner_weight, layer.inner_bias, inner_shape, true,
        [&] { prefetch_own_or(layer.ffn_gamma, layer.ffn_beta, layer.cross_gamma, layer.cross_beta); },
        [&] { return stage_normalized<T>(args.sums, args, shared, nullptr); },
        [&](int r, int column, float biased) {
          args.hidden[static_cast<int64_t>(r) * args.ffn + column] = round_to<T>(activate(args.activation, biased));
        });
    product(
        layer.outer_weight, layer.outer_bias, outer_shape, true, nothing,
        [&] { return stage_rows(args.hidden, rows, args.ffn, staged, args.ffn + pad); }, end_sublayer(false));
  }
  // The last norm (post-norm the last layer's, pre-norm the stack's final one), into the output (block 0 writes
  // it). Block r rewrites history row r: the older
  // entries of the row it continues, read before the barrier (after it, other blocks rewrite their rows), then
  // this step's entry.
  const LayerPointers<T>& last = args.layers[args.num_layers - 1];
  const bool fold_output = args.greedy.weight != nullptr;  // every block normalizes for its share of the logits
  T* ring = reinterpret_cast<T*>(reinterpret_cast<char*>(shared_memory) + args.greedy.buffer_offset);
  float* extras = reinterpret_cast<float*>(ring + static_cast<int64_t>(kLogitStages) * args.greedy.chunk_columns * d);
  arrive(args.barrier, target);
  if (blockIdx.x == 0 || fold_output)
    prefetch_norm(args.pre_norm ? args.final_gamma : last.ffn_gamma, args.pre_norm ? args.final_beta : last.ffn_beta, d,
                  shared);
  if (fold_output) {
    commit_async_copies();  // the norm's own group: its stage waits for nothing later
    prefetch_logit_extras(args.greedy, extras);  // in the first chunk's group
    for (int chunk = 0; chunk < kLogitStages - 1; ++chunk) prefetch_logit_chunk(args.greedy, d, ring, chunk);
  }
  const int rewritten = static_cast<int>(blockIdx.x) < rows ? static_cast<int>(blockIdx.x) : -1;
  const bool moves = rewritten >= 0 && step(kHistoryRow, rewritten) != rewritten;  // in place otherwise
  if (moves) stage_history(rewritten);
  wait_arrivals(args.barrier, target, args.trace);
  if (rewritten >= 0) {
    int32_t* row = args.history + static_cast<int64_t>(rewritten) * args.history_capacity;
    if (moves)
      for (int j = threadIdx.x; j < older_count(rewritten); j += blockDim.x) row[j] = shared.history[j];
    const int position = step(kPosition, rewritten), block = step(kCacheRow, rewritten);
    const bool entry = position >= 0 && position < args.history_capacity && block >= 0 && block < args.cache_blocks;
    if (threadIdx.x == 0 && entry) row[position] = block;
  }
  const unsigned final_stamp = target / gridDim.x + 1;
  if constexpr (!kTensorCores) {
    if (fold_output) {
      stage_normalized<T, kLogitStages - 1>(args.sums, args, shared, blockIdx.x == 0 ? args.output : nullptr);
      select_best_tokens<kCudaCoreRows<T>>(args, shared, ring, extras, final_stamp);
      return;
    }
  }
  if (blockIdx.x == 0) {
    stage_normalized<T>(args.sums, args, shared, args.output);
    record_time(args.trace, final_stamp);
  }
}

// The kernel's shared memory for a shape: the residual rows and a norm's parameters, the work area (the
// larger of a product's staged input rows and an attention unit's scratch with `cache_keys` keys and values
// copied ahead), then every warp's weight slot.
struct SharedLayout {
  int work_floats = 0;
  int warp_weights = 0;  // elements of T per warp (with tensor cores: the block's item slots over its warps)
  int warp_columns = 0;  // the most columns a warp computes in one product (without tensor cores)
  int cache_keys = 0;
  size_t bytes = 0;
};

bool use_tensor_cores(size_t element, int rows, int width, int ffn) {
  return element == sizeof(__half) && rows >= kTensorCoreRows && width % kMmaK == 0 && ffn % kMmaK == 0;
}

SharedLayout shared_layout(int rows, int width, int ffn, int head_dim, int max_keys, int history_capacity,
                           int cache_keys, size_t element, int grid) {
  SharedLayout layout;
  layout.cache_keys = cache_keys;
  const bool tensor_cores = use_tensor_cores(element, rows, width, ffn);
  const int pad = tensor_cores ? kRowPad : 0, warps = grid * kWarps;
  const struct { int in, out; } products[] = {{width, 3 * width}, {width, width}, {width, ffn}, {ffn, width}};
  for (const auto& product : products) {
    const int columns = (product.out + warps - 1) / warps;
    layout.warp_columns = std::max(layout.warp_columns, columns);
    if (!tensor_cores) {
      layout.warp_weights = std::max(layout.warp_weights, columns * product.in);
      continue;
    }
    const int items = (product.out / kItemColumns + grid - 1) / grid;  // a block's most items
    const int64_t per_warp = (items * item_elements(product.in) + kWarps - 1) / kWarps;
    layout.warp_weights = std::max(layout.warp_weights, static_cast<int>((per_warp + 7) / 8 * 8));  // 16-byte slots
  }
  // Staged rows of T, or a layer norm's fp32 sums.
  const size_t staged = std::max(static_cast<size_t>(rows) * (std::max(width, ffn) + pad) * element / 4,
                                 static_cast<size_t>(rows) * width);
  const size_t attention = (2 * static_cast<size_t>(cache_keys) * head_dim * element + 3) / 4 + kMaxHeadDim +
                           kWarps * (kMaxHeadDim + 2) + static_cast<size_t>(max_keys);
  layout.work_floats = static_cast<int>((std::max(staged, attention) + 3) / 4 * 4);  // keeps the slots aligned
  layout.bytes = static_cast<size_t>(rows) * (width + pad) * element +
                 (2 * static_cast<size_t>(width) + layout.work_floats) * sizeof(float) +
                 static_cast<size_t>(kWarps) * layout.warp_weights * element +
                 (tensor_cores ? kPartialFloats * sizeof(float) : 0) +
                 (static_cast<size_t>(kStepRows) * rows + history_capacity) * sizeof(int);
  return layout;
}

size_t shared_limit() {
  return std::min(ops::kPersistentDecoderMaxSharedBytes,
                  static_cast<size_t>(context().properties.sharedMemPerBlockOptin));
}

int grid_blocks() { return context().properties.multiProcessorCount; }

size_t align_16(size_t bytes) { return (bytes + 15) / 16 * 16; }

// Shared memory after the ring: the block's bias run, bitmap words and logits (rows of them).
size_t fold_extras_bytes(int vocab, int rows) {
  const int grid = grid_blocks();
  return (static_cast<size_t>(run_floats(vocab, grid)) * (1 + rows) + run_words(vocab, grid)) * sizeof(float);
}

// Shared memory the folded output layer needs at least after the layout: its ring of the smallest chunks.
size_t fold_reserve_bytes(int width, size_t element, int vocab, int rows) {
  return static_cast<size_t>(kLogitStages) * kLogitMinChunkColumns * width * element + fold_extras_bytes(vocab, rows);
}

// The shape's layout with as many keys copied ahead (at most one per thread) as the shared memory holds
// besides `reserve` bytes (the folded output layer's ring).
SharedLayout layout_for(int rows, int width, int ffn, int head_dim, int max_keys, int history_capacity, size_t element,
                        size_t reserve) {
  int keys = std::min(max_keys, kThreads);
  SharedLayout layout = shared_layout(rows, width, ffn, head_dim, max_keys, history_capacity, keys, element, grid_blocks());
  while (keys > 0 && align_16(layout.bytes) + reserve > shared_limit()) {
    keys /= 2;
    layout = shared_layout(rows, width, ffn, head_dim, max_keys, history_capacity, keys, element, grid_blocks());
  }
  return layout;
}

template <typename T>
const T* data_of(const Tensor* tensor) {
  return tensor->data<T>();
}

// One block per multiprocessor, all resident at once (the barrier needs every block running): a cooperative
// launch guarantees it.
template <typename T, bool kTensorCores>
void launch_kernel(const Arguments<T>& args, size_t shared_bytes, cudaStream_t stream) {
  allow_dynamic_shared_memory(reinterpret_cast<const void*>(persistent_decoder_kernel<T, kTensorCores>),
                              ops::kPersistentDecoderMaxSharedBytes);
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(grid_blocks()));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeCooperative;
  attribute.val.cooperative = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  CUDA_CHECK(cudaLaunchKernelEx(&config, persistent_decoder_kernel<T, kTensorCores>, args));
  CUDA_CHECK_LAUNCH();
}

// Bytes of the workspace before the folded output layer's partials: the counters' 256, the sums and the
// activations, rounded up to 16.
size_t partials_offset(int64_t rows, int64_t width, int64_t ffn, size_t element) {
  const size_t used = 256 + static_cast<size_t>(rows * width) * sizeof(float) + static_cast<size_t>(rows * (2 * width + ffn)) * element;
  return (used + 15) / 16 * 16;
}

template <typename T>
GreedyOutput<T> greedy_output(const ops::PersistentGreedyOutput& output, char* workspace, size_t partials_at) {
  GreedyOutput<T> greedy{};
  greedy.weight = output.weight->data<T>();
  greedy.bias = output.bias != nullptr ? output.bias->data<float>() : nullptr;
  greedy.suppressed = output.suppressed_bitmap != nullptr
                          ? reinterpret_cast<const uint32_t*>(output.suppressed_bitmap->data<int32_t>())
                          : nullptr;
  greedy.values = output.values->data<float>();
  greedy.ids = output.ids->data<int32_t>();
  greedy.partials = reinterpret_cast<BestPartial*>(workspace + partials_at);
  greedy.done = reinterpret_cast<unsigned*>(workspace + 128);
  greedy.vocab = static_cast<int>(output.weight->dim(0));
  greedy.streamed = static_cast<size_t>(output.weight->bytes()) * 2 > static_cast<size_t>(context().properties.l2CacheSize);
  SEQTRANS_CHECK(is_aligned(greedy.weight, 16), "persistent_decoder_step: the output weight is not 16-byte aligned");
  return greedy;
}

template <typename T>
void launch_persistent_decoder(const Tensor& x, const std::vector<ops::PersistentDecoderLayer>& layers,
                               const ops::PersistentDecoderStep& step, const ops::PersistentGreedyOutput* output,
                               Tensor& workspace, Tensor* trace, Tensor& out, cudaStream_t stream) {
  Arguments<T> args{};
  args.num_layers = static_cast<int>(layers.size());
  for (size_t l = 0; l < layers.size(); ++l) {
    const ops::PersistentDecoderLayer& from = layers[l];
    LayerPointers<T>& to = args.layers[l];
    to = {data_of<T>(from.qkv_weight),          data_of<T>(from.qkv_bias),
          data_of<T>(from.self_output_weight),  data_of<T>(from.self_output_bias),
          data_of<T>(from.self_gamma),          data_of<T>(from.self_beta),
          data_of<T>(from.cross_query_weight),  data_of<T>(from.cross_query_bias),
          data_of<T>(from.cross_output_weight), data_of<T>(from.cross_output_bias),
          data_of<T>(from.cross_gamma),         data_of<T>(from.cross_beta),
          data_of<T>(from.inner_weight),        data_of<T>(from.inner_bias),
          data_of<T>(from.outer_weight),        data_of<T>(from.outer_bias),
          data_of<T>(from.ffn_gamma),           data_of<T>(from.ffn_beta),
          from.self_keys->data<T>(),            from.self_values->data<T>(),
          data_of<T>(from.cross_keys),          data_of<T>(from.cross_values)};
  }
  // Weights, caches and activations are read 16 bytes at a time (asynchronous copies included).
  for (int l = 0; l < args.num_layers; ++l) {
    const auto* pointers = reinterpret_cast<const void* const*>(&args.layers[l]);
    for (size_t p = 0; p < sizeof(LayerPointers<T>) / sizeof(void*); ++p)
      SEQTRANS_CHECK(is_aligned(pointers[p], 16), "persistent_decoder_step: a tensor of layer {} is not 16-byte aligned", l);
  }
  const ops::PersistentDecoderLayer& first = layers.front();
  args.rows = static_cast<int>(x.dim(0));
  args.width = static_cast<int>(x.dim(1));
  args.ffn = static_cast<int>(first.inner_weight->dim(0));
  args.heads = step.num_heads;
  args.head_dim = args.width / args.heads;
  args.scale = 1.0f / std::sqrt(static_cast<float>(args.head_dim));
  args.epsilon = step.epsilon;
  args.activation = step.activation;
  args.pre_norm = step.pre_norm;
  if (step.pre_norm) {  // ops::persistent_decoder_step checked that the final norm is there and its shape
    args.final_gamma = step.final_gamma->data<T>();
    args.final_beta = step.final_beta->data<T>();
    SEQTRANS_CHECK(is_aligned(args.final_gamma, 16) && is_aligned(args.final_beta, 16),
                   "persistent_decoder_step: the final norm is not 16-byte aligned");
  }
  args.input = x.data<T>();
  args.output = out.data<T>();
  args.positions = step.positions->data<int32_t>();
  args.key_lengths = step.key_lengths->data<int32_t>();
  args.memory_starts = step.memory_starts->data<int32_t>();
  args.source_lengths = step.source_lengths->data<int32_t>();
  args.cache_rows = step.cache_rows->data<int32_t>();
  args.reorder = step.reorder != nullptr ? step.reorder->data<int32_t>() : nullptr;
  args.history = step.history->data<int32_t>();
  args.history_rows = static_cast<int>(step.history->dim(0));
  args.history_capacity = static_cast<int>(step.history->dim(1));
  args.cache_blocks = static_cast<int>(first.self_keys->dim(0));
  args.block_positions = static_cast<int>(first.self_keys->dim(1));
  args.memory_positions = static_cast<int>(first.cross_keys->dim(0));
  args.source_span = static_cast<int>(step.source_span);
  args.max_keys = std::max(args.history_capacity, args.source_span);

  // Workspace: the counters first (the barrier's, the folded output layer's 128 bytes on; 256 bytes in
  // all), then the activations, then the output layer's partials.
  const int64_t rows = args.rows, d = args.width;
  char* base = static_cast<char*>(workspace.raw());
  args.barrier = reinterpret_cast<unsigned*>(base);
  if (output != nullptr) args.greedy = greedy_output<T>(*output, base, partials_offset(rows, d, args.ffn, sizeof(T)));
  float* sums = reinterpret_cast<float*>(base + 256);
  args.sums = sums;
  T* activations = reinterpret_cast<T*>(sums + rows * d);
  args.query = activations;
  args.context = args.query + rows * d;
  args.hidden = args.context + rows * d;
  args.trace = trace != nullptr ? reinterpret_cast<unsigned long long*>(trace->raw()) : nullptr;
  CUDA_CHECK(cudaMemsetAsync(args.barrier, 0, output != nullptr ? 256 : sizeof(unsigned), stream));

  const int vocab = output != nullptr ? static_cast<int>(output->weight->dim(0)) : 0;
  const size_t reserve = output != nullptr ? fold_reserve_bytes(args.width, sizeof(T), vocab, args.rows) : 0;
  const SharedLayout layout = layout_for(args.rows, args.width, args.ffn, args.head_dim, args.max_keys,
                                         args.history_capacity, sizeof(T), reserve);
  args.cache_keys = layout.cache_keys;
  args.work_floats = layout.work_floats;
  args.warp_weights = layout.warp_weights;
  size_t shared_bytes = layout.bytes;
  if (output != nullptr) {
    // The ring after the layout, as large as what is left allows, up to kLogitStages full chunks.
    const size_t row_bytes = static_cast<size_t>(args.width) * sizeof(T), offset = align_16(layout.bytes);
    const size_t left = shared_limit() - std::min(shared_limit(), offset + fold_extras_bytes(vocab, args.rows));
    const size_t ring = std::min(left, static_cast<size_t>(kLogitStages) * kLogitChunkBytes);
    args.greedy.buffer_offset = static_cast<int>(offset);
    args.greedy.chunk_columns = static_cast<int>(ring / (kLogitStages * row_bytes));
    SEQTRANS_CHECK(args.greedy.chunk_columns >= kLogitMinChunkColumns,
                   "persistent_decoder_step: no room for the output layer's weight chunks");
    shared_bytes = offset + static_cast<size_t>(kLogitStages) * args.greedy.chunk_columns * row_bytes +
                   fold_extras_bytes(vocab, args.rows);
  }
  if constexpr (std::is_same_v<T, __half>) {
    if (use_tensor_cores(sizeof(T), args.rows, args.width, args.ffn))
      return launch_kernel<T, true>(args, shared_bytes, stream);
  }
  launch_kernel<T, false>(args, shared_bytes, stream);
}

}  // namespace

size_t persistent_decoder_workspace_bytes(int64_t rows, int64_t width, int64_t ffn, DataType dtype) {
  return partials_offset(rows, width, ffn, dtype_size(dtype)) +
         static_cast<size_t>(grid_blocks() * rows) * sizeof(BestPartial);
}

bool persistent_output_fits(DataType dtype, int64_t rows, int64_t width, int64_t ffn, int64_t heads, int64_t max_keys,
                            int64_t vocab) {
  const int64_t cuda_core_rows = dtype == DataType::F16 ? kCudaCoreRows<__half> : kCudaCoreRows<float>;
  if (rows < 1 || rows > cuda_core_rows || heads < 1 || width % heads != 0 ||
      use_tensor_cores(dtype_size(dtype), static_cast<int>(rows), static_cast<int>(width), static_cast<int>(ffn)))
    return false;
  // With no keys copied ahead (layout_for's last resort), the layout and the smallest ring fit.
  const SharedLayout layout = shared_layout(static_cast<int>(rows), static_cast<int>(width), static_cast<int>(ffn),
                                            static_cast<int>(width / heads), static_cast<int>(max_keys),
                                            static_cast<int>(max_keys), 0, dtype_size(dtype), grid_blocks());
  const size_t reserve = fold_reserve_bytes(static_cast<int>(width), dtype_size(dtype), static_cast<int>(vocab),
                                           static_cast<int>(rows));
  return align_16(layout.bytes) + reserve <= shared_limit();
}

bool persistent_decoder_fits(DataType dtype, int64_t rows, int64_t width, int64_t ffn, int64_t heads, int64_t layers,
                             int64_t max_keys) {
  const int64_t vector = 16 / static_cast<int64_t>(dtype_size(dtype));
  if (rows < 1 || rows > kMaxRows || layers < 1 || layers > kMaxLayers || heads < 1 || width % heads != 0)
    return false;
  const int64_t head_dim = width / heads;
  if (head_dim > kMaxHeadDim || head_dim % vector != 0 || ffn % vector != 0) return false;
  if (32 % (head_dim / vector) != 0) return false;  // a key row's vectors share a warp evenly
  if (width > 32 * 4 * kNormQuads) return false;
  const SharedLayout layout = shared_layout(static_cast<int>(rows), static_cast<int>(width), static_cast<int>(ffn),
                                            static_cast<int>(head_dim), static_cast<int>(max_keys),
                                            static_cast<int>(max_keys), 0, dtype_size(dtype), grid_blocks());
  const bool tensor_cores = use_tensor_cores(dtype_size(dtype), static_cast<int>(rows), static_cast<int>(width),
                                             static_cast<int>(ffn));
  const int64_t cuda_core_rows = dtype == DataType::F16 ? kCudaCoreRows<__half> : kCudaCoreRows<float>;
  if (!tensor_cores && (rows > cuda_core_rows || layout.warp_columns > kMaxWarpColumns)) return false;
  return layout.bytes <= shared_limit();
}

void persistent_decoder_step(const Tensor& x, const std::vector<ops::PersistentDecoderLayer>& layers,
                             const ops::PersistentDecoderStep& step, const ops::PersistentGreedyOutput* output,
                             Tensor& workspace, Tensor* trace, Tensor& out, cudaStream_t stream) {
  check_on_device("persistent_decoder_step", "x", x);
  check_on_device("persistent_decoder_step", "workspace", workspace);
  if (x.dtype() == DataType::F16)
    launch_persistent_decoder<__half>(x, layers, step, output, workspace, trace, out, stream);
  else
    launch_persistent_decoder<float>(x, layers, step, output, workspace, trace, out, stream);
}

}  // namespace seqtrans::cuda
