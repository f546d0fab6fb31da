#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {
namespace {

// count elements of a qkv row from `from` on, plus the bias's same columns when there is one.
void copy_part(const float* row, const float* bias, int64_t from, int64_t count, float* out) {
  for (int64_t c = 0; c < count; ++c) out[c] = bias != nullptr ? row[from + c] + bias[from + c] : row[from + c];
}

}  // namespace

void append_self_attention_step(const Tensor& qkv, const Tensor& positions, Tensor& key_cache, Tensor& value_cache,
                                Tensor& history, const ops::SelfAttentionStepOptions& options, Tensor& query) {
  const int64_t slots = qkv.dim(0), qkv_width = qkv.dim(1), query_width = query.dim(1);
  const int64_t kv_width = key_cache.dim(2), capacity = key_cache.dim(1), rows = key_cache.dim(0);
  const int64_t history_count = history.dim(0), history_capacity = history.dim(1);
  const int32_t* position = positions.data<int32_t>();
  const int32_t* cache_row_of = options.cache_rows != nullptr ? options.cache_rows->data<int32_t>() : nullptr;
  const int32_t* history_row_of = options.history_rows != nullptr ? options.history_rows->data<int32_t>() : nullptr;
  const auto cache_row = [&](int64_t s) -> int64_t { return cache_row_of != nullptr ? cache_row_of[s] : s; };
  const auto history_row = [&](int64_t s) -> int64_t { return history_row_of != nullptr ? history_row_of[s] : s; };
  // Every position is checked before anything is written: a bad step leaves the caches as they were.
  for (int64_t s = 0; s < slots; ++s) {
    SEQTRANS_CHECK(position[s] >= 0 && position[s] < history_capacity,
                   "append_self_attention_step: slot {} position {} outside capacity {}", s, position[s],
                   history_capacity);
    SEQTRANS_CHECK(cache_row(s) < rows, "append_self_attention_step: slot {} cache row {} outside {} rows", s,
                   cache_row(s), rows);
    SEQTRANS_CHECK(cache_row(s) < 0 || (history_row(s) >= 0 && history_row(s) < history_count),
                   "append_self_attention_step: slot {} history row {} outside {} rows", s, history_row(s),
                   history_count);
  }
  const float* in = qkv.data<float>();
  const float* bias = options.bias != nullptr ? options.bias->data<float>() : nullptr;
  float* q = query.data<float>();
  float* k = key_cache.data<float>();
  float* v = value_cache.data<float>();
  int32_t* entries = history.data<int32_t>();
  for (int64_t s = 0; s < slots; ++s) {
    const float* row = in + s * qkv_width;
    copy_part(row, bias, 0, query_width, q + s * query_width);
    if (cache_row(s) < 0) continue;  // a padding row: its query only
    const int64_t cache_entry = cache_row(s) * capacity + position[s] % capacity;
    copy_part(row, bias, query_width, kv_width, k + cache_entry * kv_width);
    copy_part(row, bias, query_width + kv_width, kv_width, v + cache_entry * kv_width);
    entries[history_row(s) * history_capacity + position[s]] = static_cast<int32_t>(cache_row(s));
  }
}

}  // namespace seqtrans::cpu
