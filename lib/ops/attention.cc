#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
                 const AttentionOptions& options) {
  check_rank("attention", "query", query, 3);
  check_rank("attention", "keys", keys, 3);
  check_float("attention", "query", query);
  SEQTRANS_CHECK(keys.shape() == values.shape(), "attention: keys {} and values {} differ",
                 shape_string(keys.shape()), shape_string(values.shape()));
  check_extent("attention", "keys", keys, 0, query.dim(0));
  check_extent("attention", "keys", keys, 2, query.dim(2));
  check_rank("attention", "key_lengths", key_lengths, 1);
  check_dtype("attention", "key_lengths", key_lengths, DataType::I32);
  check_extent("attention", "key_lengths", key_lengths, 0, query.dim(0));
  SEQTRANS_CHECK(options.num_heads >= 1 && query.dim(2) % options.num_heads == 0,
                 "attention: width {} is not divisible by {} heads", query.dim(2), options.num_heads);
  check_same_device("attention", query, keys);
  Tensor out(query.shape(), query.dtype(), query.device());
  const ProfileScope profile("attention");
  switch (query.device()) {
    case Device::CPU: cpu::attention(query, keys, values, key_lengths, options, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(attention, query, keys, values, key_lengths, options, out); break;
  }
  return out;
}

}  // namespace seqtrans::ops
