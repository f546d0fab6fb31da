#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void append_self_attention_step(const Tensor& qkv, const Tensor& bias, const Tensor& positions, Tensor& key_cache,
                                 Tensor& value_cache, Tensor& history, Tensor& query) {
  const int64_t slots = qkv.dim(0), width = query.dim(1), capacity = key_cache.dim(1);
  const int32_t* position = positions.data<int32_t>();
  // Every position is checked before anything is written: a bad step leaves the caches as they were.
  for (int64_t s = 0; s < slots; ++s)
    SEQTRANS_CHECK(position[s] >= 0 && position[s] < capacity,
                   "append_self_attention_step: slot {} position {} outside capacity {}", s, position[s], capacity);
  const float* in = qkv.data<float>();
  const float* shift = bias.data<float>();
  float* q = query.data<float>();
  float* k = key_cache.data<float>();
  float* v = value_cache.data<float>();
  int32_t* rows = history.data<int32_t>();
  for (int64_t s = 0; s < slots; ++s) {
    const float* row = in + s * 3 * width;
    const int64_t cache_row = s * capacity + position[s];
    for (int64_t c = 0; c < width; ++c) {
      q[s * width + c] = row[c] + shift[c];
      k[cache_row * width + c] = row[width + c] + shift[width + c];
      v[cache_row * width + c] = row[2 * width + c] + shift[2 * width + c];
    }
    rows[cache_row] = static_cast<int32_t>(s);
  }
}

}  // namespace seqtrans::cpu
