// An attention shape for the grouped-query op tests (query heads, key/value heads, head size) and the
// options the attention op takes for it.
#pragma once

#include <cmath>
#include <cstdint>

#include "ops/ops.h"

namespace seqtrans::testing {

struct Heads {
  int heads, kv_heads, head_dim;
  int64_t width() const { return int64_t{heads} * head_dim; }
  int64_t kv_width() const { return int64_t{kv_heads} * head_dim; }
};

inline ops::AttentionOptions gqa_options(const Heads& shape, const Tensor* key_rows = nullptr) {
  ops::AttentionOptions options;
  options.num_heads = shape.heads;
  options.num_kv_heads = shape.kv_heads;
  options.scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  options.key_rows = key_rows;
  return options;
}

}  // namespace seqtrans::testing
