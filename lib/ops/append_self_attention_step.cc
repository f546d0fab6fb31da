#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor append_self_attention_step(const Tensor& qkv, const Tensor& bias, const Tensor& positions, Tensor& key_cache,
                                  Tensor& value_cache, Tensor& history, const Tensor* cache_rows) {
  const char* op = "append_self_attention_step";
  check_rank(op, "qkv", qkv, 2);
  check_float(op, "qkv", qkv);
  SEQTRANS_CHECK(qkv.dim(1) % 3 == 0, "{}: qkv width {} is not 3 * d", op, qkv.dim(1));
  const int64_t slots = qkv.dim(0), width = qkv.dim(1) / 3;
  check_rank(op, "bias", bias, 1);
  check_dtype(op, "bias", bias, qkv.dtype());
  check_extent(op, "bias", bias, 0, qkv.dim(1));
  check_rank(op, "positions", positions, 1);
  check_dtype(op, "positions", positions, DataType::I32);
  check_extent(op, "positions", positions, 0, slots);
  check_rank(op, "key_cache", key_cache, 3);
  check_dtype(op, "key_cache", key_cache, qkv.dtype());
  // The caches may hold more rows than slots: rows past them hold keys that slots' histories still use.
  SEQTRANS_CHECK(cache_rows != nullptr || key_cache.dim(0) >= slots, "{}: key_cache has {} rows for {} slots", op, key_cache.dim(0), slots);
  check_extent(op, "key_cache", key_cache, 2, width);
  SEQTRANS_CHECK(value_cache.defined() && value_cache.shape() == key_cache.shape(),
                 "{}: value_cache {} differs from key_cache {}", op, shape_string(value_cache.shape()),
                 shape_string(key_cache.shape()));
  check_dtype(op, "value_cache", value_cache, qkv.dtype());
  check_rank(op, "history", history, 2);
  check_dtype(op, "history", history, DataType::I32);
  check_extent(op, "history", history, 0, slots);
  // Whole rows: the history spans the cache's positions; blocks (cache_rows): it spans any number of them.
  if (cache_rows == nullptr) check_extent(op, "history", history, 1, key_cache.dim(1));
  if (cache_rows != nullptr) {
    check_rank(op, "cache_rows", *cache_rows, 1);
    check_dtype(op, "cache_rows", *cache_rows, DataType::I32);
    check_extent(op, "cache_rows", *cache_rows, 0, slots);
    check_same_device(op, qkv, *cache_rows);
  }
  const Tensor* operands[] = {&bias, &positions, &key_cache, &value_cache, &history};
  for (const Tensor* operand : operands) check_same_device(op, qkv, *operand);
  Tensor query({slots, width}, qkv.dtype(), qkv.device());
  const ProfileScope profile("other kernels");
  switch (qkv.device()) {
    case Device::CPU:
      cpu::append_self_attention_step(qkv, bias, positions, key_cache, value_cache, history, cache_rows, query);
      break;
    case Device::CUDA:
      SEQTRANS_ON_CUDA(append_self_attention_step, qkv, bias, positions, key_cache, value_cache, history, cache_rows,
                       query);
      break;
  }
  return query;
}

}  // namespace seqtrans::ops
