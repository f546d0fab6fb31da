#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void append_self_attention_step(const Tensor& qkv, const Tensor& bias, const Tensor& positions, Tensor& key_cache,
                                 Tensor& value_cache, Tensor& history, const Tensor* cache_rows, Tensor& query) {
  const int64_t slots = qkv.dim(0), width = query.dim(1), capacity = key_cache.dim(1), rows = key_cache.dim(0);
  const int64_t history_capacity = history.dim(1);
  const int32_t* position = positions.data<int32_t>();
  const int32_t* cache_row_of = cache_rows != nullptr ? cache_rows->data<int32_t>() : nullptr;
  const auto cache_row = [&](int64_t s) -> int64_t { return cache_row_of != nullptr ? cache_row_of[s] : s; };
  // Every position is checked before anything is written: a bad step leaves the caches as they were.
  for (int64_t s = 0; s < slots; ++s) {
    SEQTRANS_CHECK(position[s] >= 0 && position[s] < history_capacity,
                   "append_self_attention_step: slot {} position {} outside capacity {}", s, position[s],
                   history_capacity);
    SEQTRANS_CHECK(cache_row(s) < rows, "append_self_attention_step: slot {} cache row {} outside {} rows", s,
                   cache_row(s), rows);
  }
  const float* in = qkv.data<float>();
  const float* shift = bias.data<float>();
  float* q = query.data<float>();
  float* k = key_cache.data<float>();
  float* v = value_cache.data<float>();
  int32_t* entries = history.data<int32_t>();
  for (int64_t s = 0; s < slots; ++s) {
    const float* row = in + s * 3 * width;
    for (int64_t c = 0; c < width; ++c) q[s * width + c] = row[c] + shift[c];
    if (cache_row(s) < 0) continue;  // a padding row: its query only
    const int64_t cache_entry = cache_row(s) * capacity + position[s] % capacity;
    for (int64_t c = 0; c < width; ++c) {
      k[cache_entry * width + c] = row[width + c] + shift[width + c];
      v[cache_entry * width + c] = row[2 * width + c] + shift[2 * width + c];
    }
    entries[s * history_capacity + position[s]] = static_cast<int32_t>(cache_row(s));
  }
}

}  // namespace seqtrans::cpu
