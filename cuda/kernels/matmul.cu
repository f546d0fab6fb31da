// matmul: cuBLAS through the row-major wrapper in cuda/runtime/gemm, except fp16 products with at most
// 8 rows (a decoder step at batch 1, or a few beams), where cuBLAS takes ~5 us per call for 0.5-2 MB of
// weights: a weight-streaming kernel with one warp per output column does them in about half that,
// with the bias and ReLU epilogue folded in. Wide outputs (the logits) of 2 to 8 rows run on tensor cores
// instead: there the CUDA-core kernel re-reads every staged row per column (H200, 32,000 columns of 512
// as graph nodes: 4 rows 13.6 us on CUDA cores, 7.2 on tensor cores, 7.4 for 1 row; at 16 rows cuBLAS's
// 6.7 us beat this kernel's 9.7). Past one row the CUDA-core kernel's work per weight grows with the rows
// times the inputs, so it keeps a product only while they are at most kSmallRowsMaxInputs.
// The small-rows kernels also fold the op after a product into their epilogue (fused_matmul_gated_activation,
// fused_matmul_bias_residual: a Llama layer's SwiGLU and its last residual sum; at one row,
// fused_project_self_attention_step: the self-attention step's query and cache writes, rotated for Llama),
// with the separate ops' roundings, so the values are theirs.
// Batch-invariant mode (core/batch_invariance.h) skips both small-rows kernels: every row count goes through
// one fixed cuBLASLt algorithm per shape (gemm_row_major_fixed_order), so a row's sums never change order.
#include <type_traits>

#include "core/batch_invariance.h"
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/kernels/layer_norm_row.cuh"
#include "cuda/runtime/gemm.h"

namespace seqtrans::cuda {
namespace {

constexpr int kSmallRows = 8;
constexpr int kSmallMaxThreads = 256;  // up to 8 warps, one output column each
constexpr size_t kSmallSharedBytes = 32 * 1024;
// Rows times inputs the CUDA-core kernel takes past one row; larger products of 2 to 8 rows go to cuBLAS.
// H200, ms a decoder step with this kernel taking every product of up to 8 rows but the logits, against
// this bound: TinyLlama (2,048 inputs) 2 rows 1.18 either way, 4 rows 1.38 against 1.29, 8 rows 1.91
// against 1.33; NLLB-600M (1,024) 4 rows 0.88 either way, 6 rows 0.95 against 0.89-0.91, 8 rows 1.02
// against 0.84-0.85.
constexpr int64_t kSmallRowsMaxInputs = 4096;

// The step-append epilogue (one fp16 row): the product's columns are a qkv row, which goes where
// append_self_attention_step puts it (query, key and value caches, history) instead of into c.
struct StepAppend {
  __half* query = nullptr;                // [1, query_width]
  __half* key_cache = nullptr;            // [rows, capacity, kv_width]
  __half* value_cache = nullptr;          // [rows, capacity, kv_width]
  int32_t* history = nullptr;             // [history_count, history_capacity]
  const int32_t* positions = nullptr;     // [1]
  const int32_t* cache_rows = nullptr;    // [1], or null: row 0
  const int32_t* history_rows = nullptr;  // [1], or null: row 0
  const __half* bias = nullptr;           // [n], added after the product is rounded; or null
  const float* rotary = nullptr;          // [rotary_positions, head_dim], or null: no rotation
  int head_dim = 0, rotary_positions = 0;
  int query_width = 0, kv_width = 0;
  int64_t capacity = 0, rows = 0, history_count = 0, history_capacity = 0;
};

// What a small-rows kernel's epilogue does with its columns: stores them in c, appends them (StepAppend) a
// column a warp, or appends them a rotary pair a warp (a column and its partner half a head later).
enum class Epilogue { Store, Append, AppendRotatedPairs };

template <typename Out>
struct SmallGemmArguments {
  const __half* a;     // [m, k]
  const __half* b;     // [n, k] (transposed operand)
  const __half* bias;  // [n] or null (fp16 output only)
  Out* c;              // [m, n]
  int n, k;
  float alpha;
  bool relu;
  bool stream_b;  // load_weights: b is read evict-first
  // Epilogues after the product is rounded to fp16 (fp16 output only), each as its own op computes it:
  // residual [m, n]: c = residual + (c + residual_bias[col]) (add_bias_residual);
  const __half* residual = nullptr;
  const __half* residual_bias = nullptr;
  // gated (the CUDA-core kernel): b holds 2 n rows, gate then up; c = silu(gate) * up (gated_activation).
  bool gated = false;
  // A prologue (the CUDA-core kernel): a is rms_norm's input, and the rows staged are its output, as
  // rms_norm computes them (stage_rms_normed); with norm_residual, a + norm_residual is normalized and block
  // 0 writes it to norm_sum (add_residual_rms_norm).
  const __half* norm_weight = nullptr;
  const __half* norm_residual = nullptr;
  __half* norm_sum = nullptr;
  float norm_epsilon = 0.0f;
  // With norm_beta (one row): a layer norm instead, gamma norm_weight, as layer_norm's warp kernel computes it
  // (stage_layer_normed).
  const __half* norm_beta = nullptr;
};

// A small-rows kernel's parameters: the step-append epilogues also take a StepAppend (only they, so that the
// other kernels' parameters stay as small as they were).
struct StepAppendArguments : SmallGemmArguments<__half> {
  StepAppend append;
};
template <typename Out, Epilogue kEpilogue>
using SmallRowsParameters =
    std::conditional_t<kEpilogue == Epilogue::Store, SmallGemmArguments<Out>, StepAppendArguments>;

// The value a column's epilogue stores: `value` (and `up`, gated) are the product plus the bias, in fp32.
template <typename Out>
__device__ __forceinline__ Out finish_value(const SmallGemmArguments<Out>& args, int64_t row, int column, float value,
                                            float up) {
  if (args.relu) value = fmaxf(value, 0.0f);
  if constexpr (std::is_same_v<Out, __half>) {
    if (args.gated) {
      const float g = __half2float(__float2half(value));
      const __half silu = __float2half(g / (1.0f + expf(-g)));
      return __float2half(__half2float(silu) * __half2float(__float2half(up)));
    }
    if (args.residual != nullptr) {
      const float rounded = __half2float(__float2half(value));
      const float shift = args.residual_bias != nullptr ? __half2float(args.residual_bias[column]) : 0.0f;
      return __float2half(__half2float(args.residual[row * args.n + column]) + (rounded + shift));
    }
  }
  return from_float<Out>(value);
}

// A weight larger than half of L2 (the logits' 33 MB at Transformer-base) is read once a step and cannot stay
// in L2: its loads are evict-first (ld.global.cs), so that it passes through without evicting what the next
// step reads again (the decoder's weights, 44 MB at Transformer-base, within the H100's 50 MB).
__device__ __forceinline__ uint4 load_weights(const uint4* from, bool streamed) {
  return streamed ? __ldcs(from) : __ldg(from);
}

// Weight vectors (16 bytes) a lane loads before it multiplies any: a 2,048-wide column is 8 of them. At one
// row a product has few columns, so few warps; each must keep many bytes in flight to cover the memory's
// latency (one load at a time streamed 0.6-2.1 TB/s of the H200's 4.8). More rows mean more sums a load, and
// registers that would cost warps: fewer loads. Two columns a warp (gated, rotary pairs): half as many of each.
template <int M, bool kTwoColumns>
__host__ __device__ constexpr int vectors_in_flight() {
  return (M <= 2 ? 8 : M <= 4 ? 4 : 2) / (kTwoColumns && M <= 4 ? 2 : 1);
}

// ---- the step-append epilogue: append_self_attention_step's writes for one row ----

// The qkv value append_self_attention_step reads for a column: the product rounded (matmul's output), then
// the bias added and rounded again.
__device__ __forceinline__ __half step_value(const StepAppend& append, int column, float product) {
  const __half rounded = __float2half(product);
  if (append.bias == nullptr) return rounded;
  return from_float<__half>(__half2float(rounded) + __half2float(append.bias[column]));
}

// Stores qkv column `column` where append_self_attention_step's kernel does: the query, or the key or value
// cache at the row's position (nothing if the position, cache row or history row is out of range), and the
// first key column records the cache row in the history.
__device__ void store_step_value(const StepAppend& append, int column, __half value) {
  if (column < append.query_width) {
    append.query[column] = value;
    return;
  }
  const int32_t position = append.positions[0];
  const int64_t row = append.cache_rows != nullptr ? append.cache_rows[0] : 0;
  const int64_t history_row = append.history_rows != nullptr ? append.history_rows[0] : 0;
  if (position < 0 || position >= append.history_capacity || row < 0 || row >= append.rows || history_row < 0 ||
      history_row >= append.history_count)
    return;
  const bool is_key = column < append.query_width + append.kv_width;
  const int c = column - append.query_width - (is_key ? 0 : append.kv_width);
  __half* cache = is_key ? append.key_cache : append.value_cache;
  cache[(row * append.capacity + position % append.capacity) * append.kv_width + c] = value;
  if (is_key && c == 0) append.history[history_row * append.history_capacity + position] = static_cast<int32_t>(row);
}

// Rotary pairs: pair p is column p % (head_dim / 2) of head p / (head_dim / 2), with its partner half a head
// later; the values' heads pair up the same way and are stored unrotated.
__device__ __forceinline__ int pair_column(int pair, int head_dim) {
  const int half = head_dim / 2;
  return pair / half * head_dim + pair % half;
}

// The pair's two values (column, then column + head_dim / 2), rotated as apply_rotary_embedding rotates
// them when they are a query or key head and the position is in the table, then stored.
__device__ void store_step_pair(const StepAppend& append, int column, float first, float second) {
  __half x1 = step_value(append, column, first), x2 = step_value(append, column + append.head_dim / 2, second);
  const int32_t position = append.positions[0];
  if (column < append.query_width + append.kv_width && position >= 0 && position < append.rotary_positions) {
    const float* cos = append.rotary + static_cast<int64_t>(position) * append.head_dim + column % append.head_dim;
    const float* sin = cos + append.head_dim / 2;
    const float a = __half2float(x1), b = __half2float(x2);
    x1 = rotated_first<__half>(a, b, *cos, *sin);
    x2 = rotated_second<__half>(a, b, *cos, *sin);
  }
  store_step_value(append, column, x1);
  store_step_value(append, column + append.head_dim / 2, x2);
}

// Threads of rms_norm's block for rows of `vectors` 16-byte vectors (cuda/kernels/rms_norm.cu, one vector a
// thread): the reduction the prologue must repeat.
__host__ __device__ constexpr int rms_norm_threads(int vectors) { return vectors <= 32 ? 32 : (vectors + 31) / 32 * 32; }

// Stages the M rows of rms_norm(a (+ residual)) in shared memory with rms_norm's bits: each of its block's
// threads sums the squares of its vector, warps sum those, and one warp sums the warps' sums (block_sum); a
// block of fewer threads plays its threads and warps in turn, in the same order.
template <typename Out, int M>
__device__ void stage_rms_normed(const SmallGemmArguments<Out>& args, uint4* staged) {
  __shared__ float warp_squares[32];
  const int vectors = args.k / 8, virtual_threads = rms_norm_threads(vectors);
  const int lane = threadIdx.x % 32, virtual_warps = virtual_threads / 32;
  const uint4* rows = reinterpret_cast<const uint4*>(args.a);
  const uint4* residual_rows = reinterpret_cast<const uint4*>(args.norm_residual);
  const uint4* weight = reinterpret_cast<const uint4*>(args.norm_weight);
  // Row r's vector v: a + residual rounded to fp16 (the sum add_residual_rms_norm normalizes), or a.
  const auto input = [&](int r, int v) {
    uint4 x = rows[r * vectors + v];
    if (residual_rows != nullptr) {
      const uint4 skip = residual_rows[r * vectors + v];
      __half* h = reinterpret_cast<__half*>(&x);
      const __half* k = reinterpret_cast<const __half*>(&skip);
#pragma unroll
      for (int e = 0; e < 8; ++e) h[e] = residual_sum_element(h[e], k[e]);
    }
    return x;
  };
  for (int r = 0; r < M; ++r) {
    for (int base = 0; base < virtual_threads; base += blockDim.x) {
      const int t = base + threadIdx.x;
      float squares = 0.0f;
      if (t < vectors) {
        const uint4 x = input(r, t);
        const __half* h = reinterpret_cast<const __half*>(&x);
#pragma unroll
        for (int e = 0; e < 8; ++e) {
          const float value = __half2float(h[e]);
          squares += value * value;
        }
      }
      const float warp_total = warp_sum(squares);
      if (lane == 0 && t < virtual_threads) warp_squares[t / 32] = warp_total;
    }
    __syncthreads();
    const float total = warp_sum(lane < virtual_warps ? warp_squares[lane] : 0.0f);
    const float inverse_rms = rsqrtf(total / static_cast<float>(args.k) + args.norm_epsilon);
    for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
      const uint4 x = input(r, v), w = weight[v];
      if (args.norm_sum != nullptr && blockIdx.x == 0) reinterpret_cast<uint4*>(args.norm_sum)[r * vectors + v] = x;
      uint4 normalized;
      const __half* h = reinterpret_cast<const __half*>(&x);
      const __half* g = reinterpret_cast<const __half*>(&w);
      __half* out = reinterpret_cast<__half*>(&normalized);
#pragma unroll
      for (int e = 0; e < 8; ++e)
        out[e] = rms_normed_element(__half2float(h[e]), inverse_rms, g[e]);
      staged[r * vectors + v] = normalized;
    }
    __syncthreads();  // warp_squares is read before the next row writes it
  }
}

// The layer-norm prologue (one row): the block's first warp normalizes a's row with layer_norm's warp-kernel
// code (cuda/kernels/layer_norm_row.cuh) into the staged row, so the product reads layer_norm's bits.
// kVectors: layer_norm's own choice for the width (launch_layer_norm).
template <typename Out, int kVectors>
__device__ void stage_layer_normed(const SmallGemmArguments<Out>& args, uint4* staged) {
  if (threadIdx.x < 32) {
    LayerNormArguments<__half> row{};
    row.x = args.a;
    row.gamma = args.norm_weight;
    row.beta = args.norm_beta;
    row.epsilon = args.norm_epsilon;
    row.rows = 1;
    row.width = args.k;
    layer_norm_row_in_warp<__half, kVectors, RowInput::X, /*kAffineAhead=*/false>(
        row, 0, static_cast<int>(threadIdx.x),
        [&](int v, const Vector<__half, 8>& value) { staged[v] = *reinterpret_cast<const uint4*>(&value); });
  }
  __syncthreads();
}

// c[r, col] = alpha * a[r, :] . b[col, :] (+ bias[col], ReLU) for r < M. a is staged in shared memory
// (kNormed: through the RMS norm prologue, its own instantiation, since the prologue's code in the plain
// kernel slowed it: NLLB batch 1 0.68-0.70 -> 0.78 ms a step, H200); each lane reads 16-byte slices of the
// weight row and keeps M fp32 sums. The first slices' loads are issued before the staging (and before the
// kernel waits for its inputs), so they are in flight while it runs. A lane sums its slices in ascending
// order, however many are in flight: the bits do not depend on vectors_in_flight.
template <typename Out, int M, bool kGated, bool kNormed = false, int kLayerNormVectors = 0,
          Epilogue kEpilogue = Epilogue::Store>
__global__ void __launch_bounds__(kSmallMaxThreads) small_rows_gemm_kernel(SmallRowsParameters<Out, kEpilogue> args) {
  constexpr bool kPairs = kEpilogue == Epilogue::AppendRotatedPairs, kTwoColumns = kGated || kPairs;
  static_assert(kEpilogue == Epilogue::Store || (M == 1 && std::is_same_v<Out, __half> && !kGated),
                "the step append takes one fp16 row");
  extern __shared__ uint4 staged[];  // [M, k / 8] vectors of 8 halves
  const int vectors = args.k / 8;
  const int lane = threadIdx.x % 32;
  // The warp's item: a column, or a rotary pair (its first column, the second half a head later).
  const int item = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, items = kPairs ? args.n / 2 : args.n;
  // A warp past the last item loads the last item's weights and stores nothing: it must reach the barrier.
  int column = item, loaded = min(item, args.n - 1);
  if constexpr (kPairs) column = loaded = pair_column(min(item, items - 1), args.append.head_dim);
  const uint4* weights = reinterpret_cast<const uint4*>(args.b + static_cast<int64_t>(loaded) * args.k);
  // The second column's weights, its sums kept beside the first's: gated, the up column n rows further;
  // pairs, the partner half a head further.
  const uint4* up_weights = kGated ? weights + static_cast<int64_t>(args.n) * vectors : nullptr;
  if constexpr (kPairs) up_weights = weights + static_cast<int64_t>(args.append.head_dim / 2) * vectors;
  constexpr int kLoads = vectors_in_flight<M, kTwoColumns>(), kUpLoads = kTwoColumns ? kLoads : 1;
  uint4 w[kLoads], u[kUpLoads];
  const auto load_slices = [&](int first) {
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int v = first + 32 * i;
      if (v >= vectors) break;
      w[i] = load_weights(weights + v, args.stream_b);
      if constexpr (kTwoColumns) u[i] = load_weights(up_weights + v, args.stream_b);
    }
  };
  load_slices(lane);
  // The weights are loaded while the kernel before this one may still run (no kernel writes them:
  // cuda/kernels/launch.cuh); a, the residual and the caches are read and written only after the wait.
  wait_for_inputs();
  release_dependents();
  if constexpr (kLayerNormVectors > 0) {
    static_assert(M == 1, "the layer-norm prologue stages one row");
    stage_layer_normed<Out, kLayerNormVectors>(args, staged);
  } else if constexpr (kNormed) {
    stage_rms_normed<Out, M>(args, staged);
  } else {
    for (int i = threadIdx.x; i < M * vectors; i += blockDim.x) staged[i] = reinterpret_cast<const uint4*>(args.a)[i];
    __syncthreads();
  }
  if (item >= items) return;  // the whole warp leaves together, after the barrier
  constexpr int kUpRows = kTwoColumns ? M : 1;
  float sums[M], up_sums[kUpRows];
#pragma unroll
  for (int r = 0; r < M; ++r) sums[r] = 0.0f;
#pragma unroll
  for (int r = 0; r < kUpRows; ++r) up_sums[r] = 0.0f;
  for (int first = lane; first < vectors; first += 32 * kLoads) {
    if (first != lane) load_slices(first);
#pragma unroll
    for (int i = 0; i < kLoads; ++i) {
      const int v = first + 32 * i;
      if (v >= vectors) break;
      const __half2* w2 = reinterpret_cast<const __half2*>(&w[i]);
      const __half2* u2 = reinterpret_cast<const __half2*>(&u[kTwoColumns ? i : 0]);
#pragma unroll
      for (int r = 0; r < M; ++r) {
        const uint4 x = staged[r * vectors + v];
        const __half2* x2 = reinterpret_cast<const __half2*>(&x);
#pragma unroll
        for (int e = 0; e < 4; ++e) {
          const float2 wf = __half22float2(w2[e]), xf = __half22float2(x2[e]);
          sums[r] = fmaf(wf.x, xf.x, fmaf(wf.y, xf.y, sums[r]));
          if constexpr (kTwoColumns) {
            const float2 uf = __half22float2(u2[e]);
            up_sums[r] = fmaf(uf.x, xf.x, fmaf(uf.y, xf.y, up_sums[r]));
          }
        }
      }
    }
  }
#pragma unroll
  for (int r = 0; r < M; ++r) {
    float value = warp_sum(sums[r]) * args.alpha;
    float up = 0.0f;
    if constexpr (kTwoColumns) up = warp_sum(up_sums[r < kUpRows ? r : 0]) * args.alpha;
    if constexpr (kEpilogue == Epilogue::Append) {
      if (lane == 0) store_step_value(args.append, column, step_value(args.append, column, value));
    } else if constexpr (kPairs) {
      if (lane == 0) store_step_pair(args.append, column, value, up);
    } else if (lane == r) {
      if (args.bias != nullptr) {
        value += __half2float(args.bias[column]);
        if constexpr (kGated) up += __half2float(args.bias[args.n + column]);
      }
      args.c[static_cast<int64_t>(r) * args.n + column] = finish_value(args, r, column, value, up);
    }
  }
}

// Tensor cores for wide outputs of a few rows: a warp computes 8 columns of all (up to 16) rows as
// mma.m16n8k16 tiles, taking the inputs 32 at a time. Each lane loads 16 bytes of weight row lane / 4 and
// of input rows lane / 4 and lane / 4 + 8 straight into the fragments: inside each slice of 32 the inputs
// are taken in another order, the same for both operands, which a dot product does not see. Rows past m
// repeat the last and are not written.
constexpr int kMmaColumns = 8;
constexpr int kMmaSliceVectors = 4;   // 16-byte vectors of a 32-input slice, one per lane of a quad
constexpr int kMmaSlicesInFlight = 4;  // slices whose weights a lane loads before multiplying any
constexpr int kMmaWarps = 8;
// Narrower outputs keep too few loads in flight (a warp each 8 columns): TinyLlama's gate and up product
// (11,264 columns) took a 2-row step to 1.59 ms, against 1.18 on the CUDA-core kernel.
constexpr int kMmaMinColumns = 16384;

// Two mma steps over one 32-input slice: the lane's weight vector w (8 inputs of its column) against the
// same 8 inputs of its two rows, x (row lane / 4) and y (row lane / 4 + 8).
__device__ __forceinline__ void multiply_slice(float (&sums)[4], const uint4& w, const uint4& x, const uint4& y) {
  mma_m16n8k16(sums, x.x, y.x, x.y, y.y, w.x, w.y);
  mma_m16n8k16(sums, x.z, y.z, x.w, y.w, w.z, w.w);
}

template <typename Out>
__global__ void __launch_bounds__(kMmaWarps * 32) small_rows_mma_kernel(SmallGemmArguments<Out> args, int m) {
  const int lane = threadIdx.x % 32, quad = lane % 4, group = lane / 4;
  const int first = (blockIdx.x * kMmaWarps + threadIdx.x / 32) * kMmaColumns;
  if (first >= args.n) return;
  const int slices = args.k / (kMmaSliceVectors * 8), row_vectors = args.k / 8;
  const uint4* weights =
      reinterpret_cast<const uint4*>(args.b) + static_cast<int64_t>(min(first + group, args.n - 1)) * row_vectors + quad;
  const uint4* x = reinterpret_cast<const uint4*>(args.a) + static_cast<int64_t>(min(group, m - 1)) * row_vectors + quad;
  const uint4* y = reinterpret_cast<const uint4*>(args.a) + static_cast<int64_t>(min(group + 8, m - 1)) * row_vectors + quad;
  float sums[4] = {0.0f, 0.0f, 0.0f, 0.0f};
  uint4 w[kMmaSlicesInFlight];
  const auto load_group = [&](int first) {
#pragma unroll
    for (int s = 0; s < kMmaSlicesInFlight; ++s)
      w[s] = load_weights(weights + (first + s) * kMmaSliceVectors, args.stream_b);
  };
  // The first group's weights are loaded before the wait (no kernel writes them: cuda/kernels/launch.cuh).
  if (kMmaSlicesInFlight <= slices) load_group(0);
  wait_for_inputs();
  release_dependents();
  int slice = 0;
  for (; slice + kMmaSlicesInFlight <= slices; slice += kMmaSlicesInFlight) {
    if (slice != 0) load_group(slice);
#pragma unroll
    for (int s = 0; s < kMmaSlicesInFlight; ++s)
      multiply_slice(sums, w[s], __ldg(x + (slice + s) * kMmaSliceVectors), __ldg(y + (slice + s) * kMmaSliceVectors));
  }
  for (; slice < slices; ++slice)
    multiply_slice(sums, load_weights(weights + slice * kMmaSliceVectors, args.stream_b), __ldg(x + slice * kMmaSliceVectors),
                   __ldg(y + slice * kMmaSliceVectors));
  // The lane's sums: rows group and group + 8, columns first + 2 quad and the next.
#pragma unroll
  for (int e = 0; e < 4; ++e) {
    const int r = group + (e / 2) * 8, column = first + 2 * quad + e % 2;
    if (r >= m || column >= args.n) continue;
    float value = sums[e] * args.alpha;
    if (args.bias != nullptr) value += __half2float(args.bias[column]);
    args.c[static_cast<int64_t>(r) * args.n + column] = finish_value(args, r, column, value, 0.0f);
  }
}

template <typename Out>
void launch_small_rows_mma(const SmallGemmArguments<Out>& args, int m, cudaStream_t stream) {
  const int items = (args.n + kMmaColumns - 1) / kMmaColumns;
  const unsigned blocks = static_cast<unsigned>((items + kMmaWarps - 1) / kMmaWarps);
  launch_kernel(small_rows_mma_kernel<Out>, blocks, kMmaWarps * 32, 0, stream, args, m);
}

// Runs a small-rows kernel over `items` warp items (columns, or rotary pairs) of m staged rows. Narrow
// outputs: 4 warps a block, so that 512 columns still spread over 128 multiprocessors. Wide ones (the
// logits): 8, so that fewer blocks stage the rows of a.
template <typename Parameters>
void launch_warp_items(void (*kernel)(Parameters), const Parameters& args, int m, int items, cudaStream_t stream) {
  const int threads = args.n <= 4096 ? 128 : kSmallMaxThreads, warps = threads / 32;
  const unsigned blocks = static_cast<unsigned>((items + warps - 1) / warps);
  const size_t shared = static_cast<size_t>(m) * args.k * sizeof(__half);
  launch_kernel(kernel, blocks, threads, shared, stream, args);
}

template <typename Out, int M>
void launch_small_rows(const SmallGemmArguments<Out>& args, cudaStream_t stream) {
  auto kernel = args.gated ? small_rows_gemm_kernel<Out, M, true> : small_rows_gemm_kernel<Out, M, false>;
  // The norm prologues run at one row only (fused_rms_norm_matmul, fused_layer_norm_matmul).
  if constexpr (M == 1) {
    if (args.norm_beta != nullptr) {
      switch (layer_norm_lane_vectors(args.k / 8)) {  // layer_norm's warp kernel for this width
        case 1: kernel = small_rows_gemm_kernel<Out, 1, false, false, 1>; break;
        case 2: kernel = small_rows_gemm_kernel<Out, 1, false, false, 2>; break;
        case 4: kernel = small_rows_gemm_kernel<Out, 1, false, false, 4>; break;
        default: kernel = small_rows_gemm_kernel<Out, 1, false, false, 8>; break;
      }
    } else if (args.norm_weight != nullptr) {
      kernel = args.gated ? small_rows_gemm_kernel<Out, 1, true, true> : small_rows_gemm_kernel<Out, 1, false, true>;
    }
  }
  launch_warp_items(kernel, args, M, args.n, stream);
}

// The step-append forms (one fp16 row) with the prologue the arguments ask for: a layer norm (as
// launch_small_rows picks its vectors a lane), an RMS norm, or none.
template <Epilogue kEpilogue>
void launch_step_append(const StepAppendArguments& args, cudaStream_t stream) {
  auto kernel = small_rows_gemm_kernel<__half, 1, false, false, 0, kEpilogue>;
  if (args.norm_beta != nullptr) {
    switch (layer_norm_lane_vectors(args.k / 8)) {
      case 1: kernel = small_rows_gemm_kernel<__half, 1, false, false, 1, kEpilogue>; break;
      case 2: kernel = small_rows_gemm_kernel<__half, 1, false, false, 2, kEpilogue>; break;
      case 4: kernel = small_rows_gemm_kernel<__half, 1, false, false, 4, kEpilogue>; break;
      default: kernel = small_rows_gemm_kernel<__half, 1, false, false, 8, kEpilogue>; break;
    }
  } else if (args.norm_weight != nullptr) {
    kernel = small_rows_gemm_kernel<__half, 1, false, true, 0, kEpilogue>;
  }
  const int items = kEpilogue == Epilogue::AppendRotatedPairs ? args.n / 2 : args.n;
  launch_warp_items(kernel, args, 1, items, stream);
}

template <typename Out>
void dispatch_small_rows(const SmallGemmArguments<Out>& args, int m, cudaStream_t stream) {
  switch (m) {
    case 1: launch_small_rows<Out, 1>(args, stream); break;
    case 2: launch_small_rows<Out, 2>(args, stream); break;
    case 3: launch_small_rows<Out, 3>(args, stream); break;
    case 4: launch_small_rows<Out, 4>(args, stream); break;
    case 5: launch_small_rows<Out, 5>(args, stream); break;
    case 6: launch_small_rows<Out, 6>(args, stream); break;
    case 7: launch_small_rows<Out, 7>(args, stream); break;
    default: launch_small_rows<Out, 8>(args, stream); break;
  }
}

// What both small-rows kernels take: fp16 operands, b transposed and 16-byte aligned, and an epilogue they
// can fold (a bias of the output's dtype, ReLU or none; fp32 output only without a bias).
bool small_rows_operands(const Tensor& a, const Tensor& b, const Tensor& c, const ops::MatmulOptions& options) {
  const bool epilogue = options.bias == nullptr ||
                        (c.dtype() == DataType::F16 && (!options.activation || options.activation == Activation::Relu));
  return a.dtype() == DataType::F16 && options.transpose_b && epilogue && is_aligned(a.raw(), 16) &&
         is_aligned(b.raw(), 16);
}

// The small-rows kernel applies: 1 row, or 2 to 8 of at most kSmallRowsMaxInputs inputs in all, of 16-byte
// multiples that fit shared memory.
bool small_rows_apply(const Tensor& a, const Tensor& b, const Tensor& c, const ops::MatmulOptions& options) {
  const int64_t m = a.dim(0), k = a.dim(1);
  return small_rows_operands(a, b, c, options) && m >= 1 && m <= kSmallRows &&
         (m == 1 || m * k <= kSmallRowsMaxInputs) && k > 0 && k % 8 == 0 &&
         static_cast<size_t>(m * k) * sizeof(__half) <= kSmallSharedBytes && c.dim(1) > 0;
}

// The tensor-core kernel applies: 2 to 8 rows (it takes up to 16: cuBLAS is faster from 9), wide outputs
// and whole 32-input slices (no shared memory: the rows are read through the cache).
bool small_rows_mma_apply(const Tensor& a, const Tensor& b, const Tensor& c, const ops::MatmulOptions& options) {
  const int64_t m = a.dim(0), k = a.dim(1);
  return small_rows_operands(a, b, c, options) && m >= 2 && m <= kSmallRows && k > 0 &&
         k % (kMmaSliceVectors * 8) == 0 && c.dim(1) >= kMmaMinColumns;
}

// The fused epilogues of ops::matmul_gated_activation and ops::matmul_bias_residual, and the RMS norm prologue
// of ops::rms_norm_matmul (SmallGemmArguments).
struct SmallRowsEpilogue {
  const __half* residual = nullptr;
  const __half* residual_bias = nullptr;
  bool gated = false;
  const __half* norm_weight = nullptr;
  const __half* norm_residual = nullptr;
  __half* norm_sum = nullptr;
  float norm_epsilon = 0.0f;
  const __half* norm_beta = nullptr;
};

template <typename Out>
void run_small_rows(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options, bool tensor_cores,
                    cudaStream_t stream, const SmallRowsEpilogue& epilogue = {}) {
  SmallGemmArguments<Out> args;
  args.residual = epilogue.residual;
  args.residual_bias = epilogue.residual_bias;
  args.gated = epilogue.gated;
  args.norm_weight = epilogue.norm_weight;
  args.norm_residual = epilogue.norm_residual;
  args.norm_sum = epilogue.norm_sum;
  args.norm_epsilon = epilogue.norm_epsilon;
  args.norm_beta = epilogue.norm_beta;
  args.a = a.data<__half>();
  args.b = b.data<__half>();
  args.bias = options.bias != nullptr ? options.bias->data<__half>() : nullptr;
  args.c = c.data<Out>();
  args.n = static_cast<int>(c.dim(1));
  args.k = static_cast<int>(a.dim(1));
  args.alpha = options.alpha;
  args.relu = options.activation == Activation::Relu;
  args.stream_b = static_cast<size_t>(b.bytes()) * 2 > static_cast<size_t>(context().properties.l2CacheSize);
  if (tensor_cores)
    launch_small_rows_mma(args, static_cast<int>(a.dim(0)), stream);
  else
    dispatch_small_rows(args, static_cast<int>(a.dim(0)), stream);
}

// The problem as gemm_row_major takes it.
GemmProblem gemm_problem(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options) {
  GemmProblem problem;
  problem.a = a.raw();
  problem.b = b.raw();
  problem.c = c.raw();
  problem.dtype = a.dtype();
  problem.output_dtype = c.dtype();
  problem.m = a.dim(0);
  problem.k = a.dim(1);
  problem.n = c.dim(1);
  problem.transpose_b = options.transpose_b ? TransposeB::Yes : TransposeB::No;
  problem.alpha = options.alpha;
  return problem;
}

// Batch-invariant: the GEMM in one fixed order, with the bias and ReLU folded in; other activations after it,
// element by element (an order of their own does not arise).
void matmul_fixed_order(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options,
                        cudaStream_t stream) {
  const GemmProblem problem = gemm_problem(a, b, c, options);
  const bool folded = options.bias != nullptr && (!options.activation || options.activation == Activation::Relu);
  if (folded) {
    const GemmEpilogue epilogue = options.activation ? GemmEpilogue::ReluBias : GemmEpilogue::Bias;
    return gemm_row_major_fixed_order(problem, options.bias->raw(), epilogue, stream);
  }
  gemm_row_major_fixed_order(problem, nullptr, GemmEpilogue::None, stream);
  if (options.bias != nullptr) bias_activation(c, *options.bias, *options.activation, stream);
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options, cudaStream_t stream) {
  check_on_device("matmul", "a", a);
  check_on_device("matmul", "b", b);
  check_same_dtype("matmul", "c", c, options.fp32_output ? DataType::F32 : a.dtype());
  const int64_t k = a.dim(1);
  if (batch_invariant() && k > 0) return matmul_fixed_order(a, b, c, options, stream);
  const bool tensor_cores = small_rows_mma_apply(a, b, c, options);
  if (tensor_cores || small_rows_apply(a, b, c, options)) {
    if (c.dtype() == DataType::F32)
      run_small_rows<float>(a, b, c, options, tensor_cores, stream);
    else
      run_small_rows<__half>(a, b, c, options, tensor_cores, stream);
    return;
  }
  const GemmProblem problem = gemm_problem(a, b, c, options);
  if (options.bias == nullptr) {
    gemm_row_major(problem, stream);
    return;
  }
  const bool relu = options.activation == Activation::Relu;
  const bool fusable = !options.activation || relu;
  if (fusable && gemm_row_major_with_bias(problem, options.bias->raw(), relu ? GemmEpilogue::ReluBias : GemmEpilogue::Bias,
                                          stream))
    return;
  gemm_row_major(problem, stream);
  if (options.activation)
    bias_activation(c, *options.bias, *options.activation, stream);
  else
    add_bias(c, *options.bias, stream);
}

namespace {

// The CUDA-core small-rows kernel takes x W^T (+ bias) into out, and matmul would run it there too (not on
// tensor cores, which sum in another order): the condition of its fused forms. gated: out stands for the c
// the kernel writes, half as wide as the product of W's 2 n rows.
bool cuda_core_small_rows(const Tensor& x, const Tensor& weight, const ops::MatmulOptions& options, const Tensor& out) {
  const bool product_on_tensor_cores = x.dim(0) >= 2 && weight.dim(0) >= kMmaMinColumns &&
                                       x.dim(1) % (kMmaSliceVectors * 8) == 0;
  return !batch_invariant() && out.dtype() == DataType::F16 && !product_on_tensor_cores &&
         small_rows_apply(x, weight, out, options);
}

// rms_norm's kernel reads 16-byte vectors, one a thread, up to 1,024 threads: the reduction the RMS prologue
// repeats.
bool rms_prologue_fits(const Tensor& x, const ops::RmsNormWeights& norm, const Tensor* residual) {
  const int64_t vectors = x.dim(1) / 8;
  return x.dim(1) % 8 == 0 && vectors <= 1024 && norm.weight.dtype() == DataType::F16 &&
         norm.weight.shape() == Shape{x.dim(1)} && is_aligned(norm.weight.raw(), 16) &&
         (residual == nullptr || is_aligned(residual->raw(), 16));
}

// The rows layer_norm's warp kernel takes (at most 256 16-byte vectors, every operand aligned): the arithmetic
// the layer-norm prologue repeats.
bool layer_norm_prologue_fits(const Tensor& x, const ops::LayerNormWeights& norm) {
  const int64_t k = x.dim(1);
  const auto fp16_vector = [&](const Tensor& t) {
    return t.dtype() == DataType::F16 && t.shape() == Shape{k} && t.device() == Device::CUDA && is_aligned(t.raw(), 16);
  };
  return k % 8 == 0 && k / 8 <= 256 && fp16_vector(norm.gamma) && fp16_vector(norm.beta);
}

}  // namespace

bool fused_matmul_gated_activation(const Tensor& x, const Tensor& weight, const Tensor* bias, Tensor& out,
                                   cudaStream_t stream) {
  ops::MatmulOptions options;
  options.bias = bias;
  // Each warp computes a gate column and its up column.
  if (!cuda_core_small_rows(x, weight, options, out)) return false;
  SmallRowsEpilogue epilogue;
  epilogue.gated = true;
  run_small_rows<__half>(x, weight, out, options, /*tensor_cores=*/false, stream, epilogue);
  return true;
}

bool fused_rms_norm_matmul(const Tensor& x, const RmsNormProduct& product, Tensor& out, cudaStream_t stream) {
  ops::MatmulOptions options;
  options.bias = product.bias;
  // One row only: every block normalizes the rows it stages, which at 2 rows cost more than the launch it
  // saves (H200, TinyLlama shape, ms a token: 1 row 1.030 -> 1.012, 2 rows 1.21 -> 1.26).
  if (x.dim(0) != 1 || !rms_prologue_fits(x, product.norm, product.residual) ||
      !cuda_core_small_rows(x, product.weight, options, out))
    return false;
  SmallRowsEpilogue epilogue;
  epilogue.gated = product.gated;
  epilogue.norm_weight = product.norm.weight.data<__half>();
  epilogue.norm_residual = product.residual != nullptr ? product.residual->data<__half>() : nullptr;
  epilogue.norm_sum = product.sum != nullptr ? product.sum->data<__half>() : nullptr;
  epilogue.norm_epsilon = product.norm.epsilon;
  run_small_rows<__half>(x, product.weight, out, options, /*tensor_cores=*/false, stream, epilogue);
  return true;
}

bool fused_layer_norm_matmul(const Tensor& x, const ops::LayerNormWeights& norm, const Tensor& weight,
                             const ops::MatmulOptions& options, Tensor& out, cudaStream_t stream) {
  // One row only, as for the RMS prologue.
  if (x.dim(0) != 1 || !layer_norm_prologue_fits(x, norm) || options.prepared_b != nullptr || options.fp32_output ||
      !cuda_core_small_rows(x, weight, options, out))
    return false;
  SmallRowsEpilogue epilogue;
  epilogue.norm_weight = norm.gamma.data<__half>();
  epilogue.norm_beta = norm.beta.data<__half>();
  epilogue.norm_epsilon = norm.epsilon;
  run_small_rows<__half>(x, weight, out, options, /*tensor_cores=*/false, stream, epilogue);
  return true;
}

bool fused_matmul_bias_residual(const Tensor& x, const Tensor& weight, const Tensor& bias, const Tensor& residual,
                                Tensor& out, cudaStream_t stream) {
  if (batch_invariant() || out.dtype() != DataType::F16) return false;
  const ops::MatmulOptions options;
  const bool tensor_cores = small_rows_mma_apply(x, weight, out, options);
  if (!tensor_cores && !small_rows_apply(x, weight, out, options)) return false;
  SmallRowsEpilogue epilogue;
  epilogue.residual = residual.data<__half>();
  epilogue.residual_bias = bias.data<__half>();
  run_small_rows<__half>(x, weight, out, options, tensor_cores, stream, epilogue);
  return true;
}

bool fused_project_self_attention_step(const Tensor& x, const ops::InputNorm& norm, const Tensor& weight,
                                       const ops::SelfAttentionStepCaches& caches,
                                       const ops::SelfAttentionStepOptions& options, Tensor& query,
                                       cudaStream_t stream) {
  // The front end (ops::project_self_attention_step) checked the shapes; this checks what the kernel adds:
  // one row of a product the CUDA-core kernel takes, a norm its prologue repeats, and operands on the device
  // (the kernel cannot throw). Rotary pairs take the RMS prologue or none.
  const bool rotary = options.rotary != nullptr;
  const auto on_device = [](const Tensor* t) { return t == nullptr || t->device() == Device::CUDA; };
  const bool norm_fits = norm.layer != nullptr ? !rotary && layer_norm_prologue_fits(x, *norm.layer)
                         : norm.rms != nullptr ? norm.rms->weight.device() == Device::CUDA && rms_prologue_fits(x, *norm.rms, nullptr)
                                               : true;
  if (x.dim(0) != 1 || !norm_fits || !cuda_core_small_rows(x, weight, {}, query) || x.dtype() != DataType::F16 ||
      !on_device(&caches.positions) || !on_device(&caches.history) || !on_device(options.bias) ||
      !on_device(options.cache_rows) || !on_device(options.history_rows) || !on_device(options.rotary) ||
      weight.dim(0) > INT32_MAX || caches.key_cache.dim(2) > INT32_MAX)
    return false;
  StepAppendArguments args;
  args.a = x.data<__half>();
  args.b = weight.data<__half>();
  args.bias = nullptr;
  args.c = nullptr;
  args.n = static_cast<int>(weight.dim(0));
  args.k = static_cast<int>(x.dim(1));
  args.alpha = 1.0f;
  args.relu = false;
  args.stream_b = static_cast<size_t>(weight.bytes()) * 2 > static_cast<size_t>(context().properties.l2CacheSize);
  if (norm.layer != nullptr) {
    args.norm_weight = norm.layer->gamma.data<__half>();
    args.norm_beta = norm.layer->beta.data<__half>();
    args.norm_epsilon = norm.layer->epsilon;
  } else if (norm.rms != nullptr) {
    args.norm_weight = norm.rms->weight.data<__half>();
    args.norm_epsilon = norm.rms->epsilon;
  }
  StepAppend& append = args.append;
  append.query = query.data<__half>();
  append.key_cache = caches.key_cache.data<__half>();
  append.value_cache = caches.value_cache.data<__half>();
  append.history = caches.history.data<int32_t>();
  append.positions = caches.positions.data<int32_t>();
  append.cache_rows = options.cache_rows != nullptr ? options.cache_rows->data<int32_t>() : nullptr;
  append.history_rows = options.history_rows != nullptr ? options.history_rows->data<int32_t>() : nullptr;
  append.bias = options.bias != nullptr ? options.bias->data<__half>() : nullptr;
  append.query_width = static_cast<int>(query.dim(1));
  append.kv_width = static_cast<int>(caches.key_cache.dim(2));
  append.capacity = caches.key_cache.dim(1);
  append.rows = caches.key_cache.dim(0);
  append.history_count = caches.history.dim(0);
  append.history_capacity = caches.history.dim(1);
  if (rotary) {
    append.rotary = options.rotary->data<float>();
    append.head_dim = static_cast<int>(options.rotary->dim(1));
    append.rotary_positions = static_cast<int>(options.rotary->dim(0));
    launch_step_append<Epilogue::AppendRotatedPairs>(args, stream);
  } else {
    launch_step_append<Epilogue::Append>(args, stream);
  }
  return true;
}

}  // namespace seqtrans::cuda
