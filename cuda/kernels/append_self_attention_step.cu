// append_self_attention_step: qkv [s, q + 2 kv] (+ bias) split into the query [s, q] and the key and value
// rows of the caches [rows, capacity, kv] at (cache row, positions[slot]), plus history[history row,
// positions[slot]] = that cache row (the slot itself, or cache_rows[slot] for a pool; the history row is the
// slot or history_rows[slot]); one launch instead of a bias split and two cache writes. With a rotary table the
// query and key heads are rotated on the way (a Llama layer's rotary pass folded in).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

template <typename T>
struct StepOutputs {
  T* query;        // [s, q]
  T* key_cache;    // [rows, capacity, kv]
  T* value_cache;  // [rows, capacity, kv]
  int32_t* history;             // [history_count, history_capacity]
  const int32_t* cache_rows;    // [s], or null: slot s writes row s
  const int32_t* history_rows;  // [s], or null: slot s fills history row s
  int64_t rows;                 // cache rows (blocks with cache_rows)
  int64_t history_count;        // history rows
  int64_t history_capacity;     // positions a history row holds
};

// Vector counts of a qkv row's parts: the query's, then the keys' and the values' (as many).
struct RowSplit {
  int64_t query_vectors;
  int64_t kv_vectors;
};

// Rotary positions (optional): the query and key heads rotate as apply_rotary_embedding rotates them.
struct RotaryInputs {
  const float* table = nullptr;  // [positions, head_dim]: cos of the half head, then sin; null: none
  int head_dim = 0;
  int positions = 0;
};

// Vector i of a query or key head, `element` channels into its part of the row, rotated with its partner
// half a head away: x1 * cos - x2 * sin in the first half, x2 * cos + x1 * sin in the second (N divides
// the half head, so a vector never straddles it).
template <typename T, int N>
__device__ __forceinline__ void rotate(Vector<T, N>& value, const T* qkv, int64_t i, int64_t element, int32_t position,
                                       const RotaryInputs& rotary) {
  if (position < 0 || position >= rotary.positions) return;
  using V = Vector<T, N>;
  const int half = rotary.head_dim / 2;
  const int within = static_cast<int>(element % rotary.head_dim);
  const bool first = within < half;
  const V partner = reinterpret_cast<const V*>(qkv)[first ? i + half / N : i - half / N];
  const float* cos = rotary.table + static_cast<int64_t>(position) * rotary.head_dim + within % half;
  const float* sin = cos + half;
#pragma unroll
  for (int e = 0; e < N; ++e) {
    const float x1 = to_float(first ? value.value[e] : partner.value[e]);
    const float x2 = to_float(first ? partner.value[e] : value.value[e]);
    value.value[e] = first ? rotated_first<T>(x1, x2, cos[e], sin[e]) : rotated_second<T>(x1, x2, cos[e], sin[e]);
  }
}

// One thread per N-element vector of qkv; bias may be null.
template <typename T, int N>
__global__ void append_self_attention_step_kernel(const T* __restrict__ qkv, const T* __restrict__ bias,
                                                  const int32_t* __restrict__ positions, StepOutputs<T> outputs,
                                                  int64_t vectors, RowSplit split, int64_t capacity,
                                                  RotaryInputs rotary) {
  start_after_inputs();
  using V = Vector<T, N>;
  const int64_t row_vectors = split.query_vectors + 2 * split.kv_vectors;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vectors; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t slot = i / row_vectors, column = i % row_vectors;
    V value = reinterpret_cast<const V*>(qkv)[i];
    if (bias != nullptr) {
      const V shift = reinterpret_cast<const V*>(bias)[column];
#pragma unroll
      for (int e = 0; e < N; ++e) value.value[e] = from_float<T>(to_float(value.value[e]) + to_float(shift.value[e]));
    }
    const int32_t position = positions[slot];
    const bool is_key = column >= split.query_vectors && column < split.query_vectors + split.kv_vectors;
    if (rotary.table != nullptr && (column < split.query_vectors || is_key))
      rotate<T, N>(value, qkv, i, (is_key ? column - split.query_vectors : column) * N, position, rotary);
    if (column < split.query_vectors) {
      reinterpret_cast<V*>(outputs.query)[slot * split.query_vectors + column] = value;
      continue;
    }
    const int64_t c = column - split.query_vectors - (is_key ? 0 : split.kv_vectors);
    const int64_t row = outputs.cache_rows != nullptr ? outputs.cache_rows[slot] : slot;
    const int64_t history_row = outputs.history_rows != nullptr ? outputs.history_rows[slot] : slot;
    if (position < 0 || position >= outputs.history_capacity || row < 0 || row >= outputs.rows ||
        history_row < 0 || history_row >= outputs.history_count)
      continue;
    const int64_t cache_entry = row * capacity + position % capacity;
    T* cache = is_key ? outputs.key_cache : outputs.value_cache;
    reinterpret_cast<V*>(cache)[cache_entry * split.kv_vectors + c] = value;
    if (is_key && c == 0)
      outputs.history[history_row * outputs.history_capacity + position] = static_cast<int32_t>(row);
  }
}

template <typename T>
void launch_append_self_attention_step(const Tensor& qkv, const Tensor& positions, Tensor& key_cache,
                                       Tensor& value_cache, Tensor& history,
                                       const ops::SelfAttentionStepOptions& options, Tensor& query,
                                       cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t count = qkv.elements(), query_width = query.dim(1), kv_width = key_cache.dim(2);
  const int64_t capacity = key_cache.dim(1);
  if (count == 0) return;
  const StepOutputs<T> outputs{query.data<T>(),
                               key_cache.data<T>(),
                               value_cache.data<T>(),
                               history.data<int32_t>(),
                               options.cache_rows != nullptr ? options.cache_rows->data<int32_t>() : nullptr,
                               options.history_rows != nullptr ? options.history_rows->data<int32_t>() : nullptr,
                               key_cache.dim(0),
                               history.dim(0),
                               history.dim(1)};
  const T* bias = options.bias != nullptr ? options.bias->data<T>() : nullptr;
  RotaryInputs rotary;
  if (options.rotary != nullptr) {
    rotary.table = options.rotary->data<float>();
    rotary.head_dim = static_cast<int>(options.rotary->dim(1));
    rotary.positions = static_cast<int>(options.rotary->dim(0));
  }
  const bool aligned = is_aligned(qkv.raw(), 16) && is_aligned(bias, 16) && is_aligned(outputs.query, 16) &&
                       is_aligned(outputs.key_cache, 16) && is_aligned(outputs.value_cache, 16);
  const bool whole_halves = rotary.table == nullptr || (rotary.head_dim / 2) % kWidth == 0;
  if (query_width % kWidth == 0 && kv_width % kWidth == 0 && aligned && whole_halves) {
    launch_kernel(append_self_attention_step_kernel<T, kWidth>, grid_size(count / kWidth, kThreads), kThreads, 0,
                  stream, qkv.data<T>(), bias, positions.data<int32_t>(), outputs, count / kWidth,
                  RowSplit{query_width / kWidth, kv_width / kWidth}, capacity, rotary);
  } else {
    launch_kernel(append_self_attention_step_kernel<T, 1>, grid_size(count, kThreads), kThreads, 0, stream,
                  qkv.data<T>(), bias, positions.data<int32_t>(), outputs, count, RowSplit{query_width, kv_width},
                  capacity, rotary);
  }
}

}  // namespace

void append_self_attention_step(const Tensor& qkv, const Tensor& positions, Tensor& key_cache, Tensor& value_cache,
                                Tensor& history, const ops::SelfAttentionStepOptions& options, Tensor& query,
                                cudaStream_t stream) {
  const char* op = "append_self_attention_step";
  check_on_device(op, "qkv", qkv);
  check_on_device(op, "positions", positions);
  check_on_device(op, "key_cache", key_cache);
  check_on_device(op, "value_cache", value_cache);
  check_on_device(op, "history", history);
  check_on_device(op, "query", query);
  if (options.bias != nullptr) {
    check_on_device(op, "bias", *options.bias);
    check_same_dtype(op, "bias", *options.bias, qkv.dtype());
  }
  if (options.cache_rows != nullptr) check_on_device(op, "cache_rows", *options.cache_rows);
  if (options.rotary != nullptr) {
    check_on_device(op, "rotary", *options.rotary);
    check_same_dtype(op, "rotary", *options.rotary, DataType::F32);
    SEQTRANS_CHECK(options.rotary->dim(0) <= INT32_MAX && options.rotary->dim(1) <= INT32_MAX,
                   "{}: rotary table {} exceeds the kernel's int", op, shape_string(options.rotary->shape()));
  }
  if (options.history_rows != nullptr) check_on_device(op, "history_rows", *options.history_rows);
  check_same_dtype(op, "key_cache", key_cache, qkv.dtype());
  check_same_dtype(op, "value_cache", value_cache, qkv.dtype());
  check_same_dtype(op, "query", query, qkv.dtype());
  switch (qkv.dtype()) {
    case DataType::F16:
      launch_append_self_attention_step<__half>(qkv, positions, key_cache, value_cache, history, options, query,
                                                stream);
      break;
    case DataType::F32:
      launch_append_self_attention_step<float>(qkv, positions, key_cache, value_cache, history, options, query,
                                               stream);
      break;
    case DataType::I32: throw Error("append_self_attention_step: qkv must be fp32 or fp16");
  }
}

}  // namespace seqtrans::cuda
