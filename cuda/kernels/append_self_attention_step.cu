// append_self_attention_step: qkv [s, 3d] + bias split into the query [s, d] and the key and value rows of
// the caches [rows, capacity, d] at (cache row, positions[slot]), plus history[slot, positions[slot]] = that
// cache row (the slot itself, or cache_rows[slot] for a pool); one launch instead of a bias split and two
// cache writes.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

template <typename T>
struct StepOutputs {
  T* query;        // [s, d]
  T* key_cache;    // [rows, capacity, d]
  T* value_cache;  // [rows, capacity, d]
  int32_t* history;  // [s, capacity]
  const int32_t* cache_rows;  // [s], or null: slot s writes row s
  int64_t rows;               // cache rows (blocks with cache_rows)
  int64_t history_capacity;   // positions a history row holds
};

// One thread per N-element vector of qkv. part_vectors: vectors in d.
template <typename T, int N>
__global__ void append_self_attention_step_kernel(const T* __restrict__ qkv, const T* __restrict__ bias,
                                                  const int32_t* __restrict__ positions, StepOutputs<T> outputs,
                                                  int64_t vectors, int64_t part_vectors, int64_t capacity) {
  using V = Vector<T, N>;
  const int64_t row_vectors = 3 * part_vectors;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vectors; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t slot = i / row_vectors, column = i % row_vectors;
    const int64_t part = column / part_vectors, c = column % part_vectors;
    V value = reinterpret_cast<const V*>(qkv)[i];
    const V shift = reinterpret_cast<const V*>(bias)[column];
#pragma unroll
    for (int e = 0; e < N; ++e) value.value[e] = from_float<T>(to_float(value.value[e]) + to_float(shift.value[e]));
    if (part == 0) {
      reinterpret_cast<V*>(outputs.query)[slot * part_vectors + c] = value;
      continue;
    }
    const int32_t position = positions[slot];
    const int64_t row = outputs.cache_rows != nullptr ? outputs.cache_rows[slot] : slot;
    if (position < 0 || position >= outputs.history_capacity || row < 0 || row >= outputs.rows) continue;
    const int64_t cache_entry = row * capacity + position % capacity;
    T* cache = part == 1 ? outputs.key_cache : outputs.value_cache;
    reinterpret_cast<V*>(cache)[cache_entry * part_vectors + c] = value;
    if (part == 1 && c == 0) outputs.history[slot * outputs.history_capacity + position] = static_cast<int32_t>(row);
  }
}

template <typename T>
void launch_append_self_attention_step(const Tensor& qkv, const Tensor& bias, const Tensor& positions,
                                       Tensor& key_cache, Tensor& value_cache, Tensor& history,
                                       const Tensor* cache_rows, Tensor& query, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t count = qkv.elements(), width = query.dim(1), capacity = key_cache.dim(1);
  if (count == 0) return;
  const StepOutputs<T> outputs{query.data<T>(),
                               key_cache.data<T>(),
                               value_cache.data<T>(),
                               history.data<int32_t>(),
                               cache_rows != nullptr ? cache_rows->data<int32_t>() : nullptr,
                               key_cache.dim(0),
                               history.dim(1)};
  const bool aligned = is_aligned(qkv.raw(), 16) && is_aligned(bias.raw(), 16) && is_aligned(outputs.query, 16) &&
                       is_aligned(outputs.key_cache, 16) && is_aligned(outputs.value_cache, 16);
  if (width % kWidth == 0 && aligned) {
    append_self_attention_step_kernel<T, kWidth><<<grid_size(count / kWidth, kThreads), kThreads, 0, stream>>>(
        qkv.data<T>(), bias.data<T>(), positions.data<int32_t>(), outputs, count / kWidth, width / kWidth, capacity);
  } else {
    append_self_attention_step_kernel<T, 1><<<grid_size(count, kThreads), kThreads, 0, stream>>>(
        qkv.data<T>(), bias.data<T>(), positions.data<int32_t>(), outputs, count, width, capacity);
  }
  CUDA_CHECK_LAUNCH();
}

}  // namespace

void append_self_attention_step(const Tensor& qkv, const Tensor& bias, const Tensor& positions, Tensor& key_cache,
                                Tensor& value_cache, Tensor& history, const Tensor* cache_rows, Tensor& query,
                                cudaStream_t stream) {
  const char* op = "append_self_attention_step";
  check_on_device(op, "qkv", qkv);
  check_on_device(op, "bias", bias);
  check_on_device(op, "positions", positions);
  check_on_device(op, "key_cache", key_cache);
  check_on_device(op, "value_cache", value_cache);
  check_on_device(op, "history", history);
  check_on_device(op, "query", query);
  if (cache_rows != nullptr) check_on_device(op, "cache_rows", *cache_rows);
  check_same_dtype(op, "bias", bias, qkv.dtype());
  check_same_dtype(op, "key_cache", key_cache, qkv.dtype());
  check_same_dtype(op, "value_cache", value_cache, qkv.dtype());
  check_same_dtype(op, "query", query, qkv.dtype());
  switch (qkv.dtype()) {
    case DataType::F16:
      launch_append_self_attention_step<__half>(qkv, bias, positions, key_cache, value_cache, history, cache_rows,
                                                query, stream);
      break;
    case DataType::F32:
      launch_append_self_attention_step<float>(qkv, bias, positions, key_cache, value_cache, history, cache_rows,
                                               query, stream);
      break;
    case DataType::I32: throw Error("append_self_attention_step: qkv must be fp32 or fp16");
  }
}

}  // namespace seqtrans::cuda
