#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {
namespace {

// An optional [slots] int32 index on like's device.
void check_slot_index(const char* op, const char* operand, const Tensor& index, int64_t slots, const Tensor& like) {
  check_rank(op, operand, index, 1);
  check_dtype(op, operand, index, DataType::I32);
  check_extent(op, operand, index, 0, slots);
  check_same_device(op, like, index);
}

// qkv [s, query_width + 2 d_kv] with d_kv the caches' width; returns the query's width.
int64_t check_qkv_split(const char* op, int64_t qkv_width, const Tensor& like, const Tensor& key_cache,
                        const SelfAttentionStepOptions& options) {
  const int64_t kv_width = key_cache.dim(2);
  const int64_t query_width = options.query_width == 0 ? kv_width : options.query_width;
  SEQTRANS_CHECK(query_width >= 1 && kv_width >= 1 && qkv_width == query_width + 2 * kv_width,
                 "{}: qkv width {} is not a query of {} and keys and values of {} (the caches' width)", op, qkv_width,
                 query_width, kv_width);
  if (options.bias != nullptr) {
    check_rank(op, "bias", *options.bias, 1);
    check_extent(op, "bias", *options.bias, 0, qkv_width);
    check_like(op, "bias", *options.bias, like);
  }
  return query_width;
}

// The step's operands fit a qkv of [slots, qkv_width] with like's dtype and device (qkv itself, or the input
// it is projected from); returns the query's width.
int64_t check_step_operands(const char* op, const Tensor& like, int64_t slots, int64_t qkv_width,
                            const SelfAttentionStepCaches& caches, const SelfAttentionStepOptions& options) {
  const Tensor& positions = caches.positions;
  const Tensor &key_cache = caches.key_cache, &value_cache = caches.value_cache, &history = caches.history;
  check_rank(op, "positions", positions, 1);
  check_dtype(op, "positions", positions, DataType::I32);
  check_extent(op, "positions", positions, 0, slots);
  check_rank(op, "key_cache", key_cache, 3);
  check_like(op, "key_cache", key_cache, like);
  const int64_t query_width = check_qkv_split(op, qkv_width, like, key_cache, options);
  // The caches may hold more rows than slots: rows past them hold keys that slots' histories still use.
  SEQTRANS_CHECK(options.cache_rows != nullptr || key_cache.dim(0) >= slots, "{}: key_cache has {} rows for {} slots",
                 op, key_cache.dim(0), slots);
  SEQTRANS_CHECK(value_cache.defined() && value_cache.shape() == key_cache.shape(),
                 "{}: value_cache {} differs from key_cache {}", op, shape_string(value_cache.shape()),
                 shape_string(key_cache.shape()));
  check_like(op, "value_cache", value_cache, like);
  check_rank(op, "history", history, 2);
  check_dtype(op, "history", history, DataType::I32);
  check_same_device(op, like, history);
  check_same_device(op, like, positions);
  // A history row per slot unless history_rows says which row each slot fills.
  if (options.history_rows == nullptr) check_extent(op, "history", history, 0, slots);
  if (options.history_rows != nullptr) check_slot_index(op, "history_rows", *options.history_rows, slots, like);
  // Whole rows: the history spans the cache's positions; blocks (cache_rows): it spans any number of them.
  if (options.cache_rows == nullptr) check_extent(op, "history", history, 1, key_cache.dim(1));
  if (options.cache_rows != nullptr) check_slot_index(op, "cache_rows", *options.cache_rows, slots, like);
  if (options.rotary != nullptr) {
    SEQTRANS_CHECK(options.bias == nullptr, "{}: rotary positions take no bias (add it in the projection)", op);
    const int64_t head_dim = options.rotary->dim(1);
    SEQTRANS_CHECK(head_dim % 2 == 0 &&
                       query_width == int64_t{options.rotary_shape.num_heads} * head_dim &&
                       key_cache.dim(2) == int64_t{options.rotary_shape.num_kv_heads} * head_dim,
                   "{}: {} query and {} key heads of {} channels (the rotary table's) are not qkv's {} and {}", op,
                   options.rotary_shape.num_heads, options.rotary_shape.num_kv_heads, head_dim, query_width,
                   key_cache.dim(2));
  }
  return query_width;
}

}  // namespace

Tensor append_self_attention_step(const Tensor& qkv, const Tensor& bias, const Tensor& positions, Tensor& key_cache,
                                  Tensor& value_cache, Tensor& history, const Tensor* cache_rows) {
  SelfAttentionStepOptions options;
  options.bias = &bias;
  options.cache_rows = cache_rows;
  return append_self_attention_step(qkv, positions, key_cache, value_cache, history, options);
}

Tensor append_self_attention_step(const Tensor& qkv, const Tensor& positions, Tensor& key_cache, Tensor& value_cache,
                                  Tensor& history, const SelfAttentionStepOptions& options) {
  const char* op = "append_self_attention_step";
  check_rank(op, "qkv", qkv, 2);
  check_float(op, "qkv", qkv);
  const int64_t slots = qkv.dim(0);
  const int64_t query_width =
      check_step_operands(op, qkv, slots, qkv.dim(1), {positions, key_cache, value_cache, history}, options);
  Tensor query({slots, query_width}, qkv.dtype(), qkv.device());
  // The CPU rotates a copy, then appends it: the reference the CUDA kernel's single pass is held to.
  if (options.rotary != nullptr && qkv.device() == Device::CPU) {
    Tensor rotated(qkv.shape(), qkv.dtype(), qkv.device());
    rotated.copy_from(qkv);
    apply_rotary_embedding(rotated, positions, *options.rotary, options.rotary_shape);
    SelfAttentionStepOptions plain = options;
    plain.rotary = nullptr;
    return append_self_attention_step(rotated, positions, key_cache, value_cache, history, plain);
  }
  const ProfileScope profile("other kernels");
  switch (qkv.device()) {
    case Device::CPU:
      cpu::append_self_attention_step(qkv, positions, key_cache, value_cache, history, options, query);
      break;
    case Device::CUDA:
      SEQTRANS_ON_CUDA(append_self_attention_step, qkv, positions, key_cache, value_cache, history, options, query);
      break;
  }
  return query;
}

Tensor project_self_attention_step(const Tensor& x, const InputNorm& norm, const Tensor& weight,
                                   const MatmulOptions& product, const SelfAttentionStepCaches& caches,
                                   const SelfAttentionStepOptions& options) {
  const char* op = "project_self_attention_step";
  SEQTRANS_CHECK(x.rank() == 2 && weight.rank() == 2, "{}: x {} and weight {} are not [m, k] and [n, k]", op,
                 shape_string(x.shape()), shape_string(weight.shape()));
  SEQTRANS_CHECK(product.bias == nullptr && !product.activation && !product.fp32_output && product.transpose_b &&
                     product.alpha == 1.0f && (norm.layer == nullptr || norm.rms == nullptr),
                 "{}: the product takes no bias, activation or scaling (the step's bias is options.bias), and one "
                 "norm at most", op);
#ifdef SEQTRANS_WITH_CUDA
  if (x.device() == Device::CUDA && weight.device() == Device::CUDA && x.dtype() == weight.dtype() &&
      weight.dim(1) == x.dim(1) && product.prepared_b == nullptr) {
    const int64_t query_width = check_step_operands(op, x, x.dim(0), weight.dim(0), caches, options);
    Tensor query({x.dim(0), query_width}, x.dtype(), x.device());
    const ProfileScope profile("gemm");
    if (cuda::fused_project_self_attention_step(x, norm, weight, caches, options, query, cuda::current_stream()))
      return query;
  }
#endif
  const Tensor qkv = norm.layer != nullptr ? layer_norm_matmul(x, *norm.layer, weight, product)
                     : norm.rms != nullptr ? rms_norm_matmul(x, *norm.rms, weight, nullptr, product.prepared_b)
                                           : matmul(x, weight, product);
  return append_self_attention_step(qkv, caches.positions, caches.key_cache, caches.value_cache, caches.history,
                                    options);
}

}  // namespace seqtrans::ops
