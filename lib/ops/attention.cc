#include <algorithm>
#include <vector>

#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {
namespace {

// key_rows: [b] int32 (one batch row of keys per query row) or [b, T] int32 (one per key, tq = 1).
void check_key_rows(const Tensor& key_rows, const Tensor& query) {
  SEQTRANS_CHECK(key_rows.defined(), "attention: key_rows is undefined");
  SEQTRANS_CHECK(key_rows.rank() == 1 || key_rows.rank() == 2,
                 "attention: key_rows must have rank 1 [b] or 2 [b, tk], got shape {}",
                 shape_string(key_rows.shape()));
  check_dtype("attention", "key_rows", key_rows, DataType::I32);
  check_extent("attention", "key_rows", key_rows, 0, query.dim(0));
  if (key_rows.rank() == 2) {
    SEQTRANS_CHECK(key_rows.dim(1) >= 1, "attention: key_rows [b, T] needs T >= 1");
    SEQTRANS_CHECK(query.dim(1) == 1, "attention: key_rows per key ([b, tk]) needs one query per row, got {}",
                   query.dim(1));
  }
  check_same_device("attention", query, key_rows);
}

void check_key_span(const AttentionOptions& options) {
  SEQTRANS_CHECK(options.key_span >= 0 && options.key_span <= (int64_t{1} << 30),
                 "attention: key_span {} is outside 0 .. 2^30", options.key_span);
  SEQTRANS_CHECK(options.key_span == 0 || (options.key_rows != nullptr && options.key_rows->rank() == 1),
                 "attention: key_span needs key_rows of rank 1 [b]");
}

// Query heads per kv head; keys and values are kv_heads head sizes wide.
void check_kv_heads(const AttentionOptions& options, const Tensor& query, const Tensor& keys) {
  const int kv_heads = options.num_kv_heads == 0 ? options.num_heads : options.num_kv_heads;
  SEQTRANS_CHECK(kv_heads >= 1 && options.num_heads % kv_heads == 0,
                 "attention: {} query heads do not split into groups of {} kv heads", options.num_heads, kv_heads);
  check_extent("attention", "keys", keys, 2, query.dim(2) / options.num_heads * kv_heads);
}

// [tiles, 2] int32 beside the query, for rows of their own (tq = 1). Its entries live on the device; the
// kernels clamp them to the rows.
void check_query_tiles(const Tensor& tiles, const Tensor& query) {
  check_rank("attention", "query_tiles", tiles, 2);
  check_dtype("attention", "query_tiles", tiles, DataType::I32);
  check_extent("attention", "query_tiles", tiles, 1, 2);
  SEQTRANS_CHECK(query.dim(1) == 1, "attention: query_tiles needs one query per row, got {}", query.dim(1));
  check_same_device("attention", query, tiles);
}

}  // namespace

Tensor attention_query_tiles(const std::vector<int32_t>& run_lengths, Device device) {
  std::vector<int32_t> tiles;
  int32_t first = 0;
  for (const int32_t length : run_lengths) {
    SEQTRANS_CHECK(length >= 0, "attention_query_tiles: a run of {} rows", length);
    for (int32_t offset = 0; offset < length; offset += kAttentionTileRows) {
      tiles.push_back(first + offset);
      tiles.push_back(std::min(kAttentionTileRows, length - offset));
    }
    first += length;
  }
  const Tensor host = Tensor::from_ints({static_cast<int64_t>(tiles.size() / 2), 2}, tiles);
  return device == Device::CPU ? host : host.to(device);
}

Tensor attention(const Tensor& query, const Tensor& keys, const Tensor& values, const Tensor& key_lengths,
                 const AttentionOptions& options) {
  check_rank("attention", "query", query, 3);
  check_rank("attention", "keys", keys, 3);
  check_float("attention", "query", query);
  SEQTRANS_CHECK(keys.shape() == values.shape(), "attention: keys {} and values {} differ",
                 shape_string(keys.shape()), shape_string(values.shape()));
  SEQTRANS_CHECK(keys.dtype() == query.dtype() && values.dtype() == query.dtype(),
                 "attention: query is {} but keys and values are {} and {}", dtype_name(query.dtype()),
                 dtype_name(keys.dtype()), dtype_name(values.dtype()));
  // With key_rows, keys and values are a pool of batch rows indexed by it, of any batch extent.
  if (options.key_rows == nullptr)
    check_extent("attention", "keys", keys, 0, query.dim(0));
  else
    check_key_rows(*options.key_rows, query);
  check_key_span(options);
  check_rank("attention", "key_lengths", key_lengths, 1);
  check_dtype("attention", "key_lengths", key_lengths, DataType::I32);
  check_extent("attention", "key_lengths", key_lengths, 0, query.dim(0));
  SEQTRANS_CHECK(options.num_heads >= 1 && query.dim(2) % options.num_heads == 0,
                 "attention: width {} is not divisible by {} heads", query.dim(2), options.num_heads);
  check_kv_heads(options, query, keys);
  if (options.query_tiles != nullptr) check_query_tiles(*options.query_tiles, query);
  check_same_device("attention", query, keys);
  check_same_device("attention", query, values);
  check_same_device("attention", query, key_lengths);
  Tensor out(query.shape(), query.dtype(), query.device());
  const ProfileScope profile("attention");
  switch (query.device()) {
    case Device::CPU: cpu::attention(query, keys, values, key_lengths, options, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(attention, query, keys, values, key_lengths, options, out); break;
  }
  return out;
}

}  // namespace seqtrans::ops
