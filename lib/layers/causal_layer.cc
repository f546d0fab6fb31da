#include "layers/causal_layer.h"

#include <cmath>

#include "core/error.h"

namespace seqtrans {

CausalLayer::CausalLayer(const WeightLoader& weights, const std::string& scope, const ModelConfig& config)
    : num_heads_(config.decoder.num_heads),
      num_kv_heads_(key_value_heads(config.decoder)),
      head_dim_(head_width(config, config.decoder)),
      epsilon_(config.layer_norm_epsilon) {
  SEQTRANS_CHECK(config.norm == NormKind::RmsNorm && config.gated_ffn,
                 "decoder-only layers are Llama's: RMS norms and a gated feed-forward");
  const int64_t d = config.d_model, queries = int64_t{num_heads_} * head_dim_, kv = int64_t{num_kv_heads_} * head_dim_;
  const int64_t ffn = config.decoder.ffn_dim;
  attention_norm_ = weights.get(scope + "/self_attention/norm/gamma", {d});
  qkv_ = Dense(weights, scope + "/self_attention/qkv", d, queries + 2 * kv, config.attention_bias);
  output_ = Dense(weights, scope + "/self_attention/output", queries, d, config.attention_bias);
  ffn_norm_ = weights.get(scope + "/ffn/norm/gamma", {d});
  inner_ = Dense(weights, scope + "/ffn/inner", d, 2 * ffn, config.ffn_bias);
  outer_ = Dense(weights, scope + "/ffn/outer", ffn, d, config.ffn_bias);
  // The last residual sum goes through add_bias_residual, with a zero bias where the model has none: x + 0
  // is exact, so the sum rounds once, as HF's h = residual + h does.
  outer_sum_bias_ = outer_.bias();
  if (!outer_sum_bias_.defined()) {
    const Tensor zeros = Tensor::from_floats({d}, std::vector<float>(static_cast<size_t>(d), 0.0f)).to(weights.dtype());
    outer_sum_bias_ = weights.device() == Device::CPU ? zeros : zeros.to(weights.device());
  }
}

Tensor CausalLayer::project_queries(const ops::ResidualNorm& x, const ops::SelfAttentionStepCaches& caches,
                                    const ops::SelfAttentionStepOptions& append) const {
  // A bias goes into the product (the rotation takes none after it); one row without one is a single kernel.
  if (qkv_.bias().defined()) {
    const Tensor qkv = x.normalized.defined() ? qkv_.forward(x.normalized)
                                              : ops::rms_norm_matmul(x.sum, attention_norm(), qkv_.weight(),
                                                                     &qkv_.bias(), qkv_.prepared());
    return ops::append_self_attention_step(qkv, caches.positions, caches.key_cache, caches.value_cache,
                                           caches.history, append);
  }
  const ops::MatmulOptions product = qkv_.options(false);
  if (x.normalized.defined())
    return ops::project_self_attention_step(x.normalized, {}, qkv_.weight(), product, caches, append);
  const ops::RmsNormWeights norm = attention_norm();
  return ops::project_self_attention_step(x.sum, {nullptr, &norm}, qkv_.weight(), product, caches, append);
}

ops::ResidualNorm CausalLayer::forward(const ops::ResidualNorm& x, Tensor& key_blocks, Tensor& value_blocks,
                                       const CausalPass& pass, const ops::RmsNormWeights* next, bool keys_only) const {
  const int64_t tokens = x.sum.dim(0), queries = int64_t{num_heads_} * head_dim_;
  ops::SelfAttentionStepOptions append;
  append.query_width = queries;
  append.cache_rows = &pass.cache_rows;
  append.history_rows = pass.history_rows;
  append.rotary = pass.rotary;  // the queries and keys rotate on their way into the blocks
  append.rotary_shape = {num_heads_, num_kv_heads_};
  const Tensor query = project_queries(x, {pass.positions, key_blocks, value_blocks, pass.history}, append);
  if (keys_only) return {};
  // Each token reads its keys through its history row: its own (a step), or its sequence's (a prefill).
  if (pass.history_rows != nullptr && !pass.key_rows.defined())
    pass.key_rows = ops::gather_rows(pass.history, *pass.history_rows);
  ops::AttentionOptions attention{num_heads_, 1.0f / std::sqrt(static_cast<float>(head_dim_))};
  attention.key_rows = pass.history_rows != nullptr ? &pass.key_rows : &pass.history;
  attention.num_kv_heads = num_kv_heads_;
  attention.query_tiles = pass.query_tiles;
  const Tensor context =
      ops::attention(query.reshape({tokens, 1, queries}), key_blocks, value_blocks, pass.key_lengths, attention);
  const ops::ResidualGated attended = ops::add_residual_rms_norm_matmul_gated(
      output_.forward(context.reshape({tokens, queries})), x.sum, {ffn_norm_, epsilon_}, inner_.weight(),
      inner_.bias().defined() ? &inner_.bias() : nullptr, inner_.prepared());
  // Without a bias the last sum is x W^T + residual rounded once, as add_residual_rms_norm rounds it. One row
  // keeps the sum in the product's epilogue: the next layer's norm then goes into its QKV product's prologue.
  if (next != nullptr && !outer_.bias().defined() && tokens > 1)
    return ops::add_residual_rms_norm(ops::matmul(attended.gated, outer_.weight(), outer_.options(false)), attended.sum,
                                      *next);
  return {ops::matmul_bias_residual(attended.gated, outer_.weight(), outer_sum_bias_, attended.sum, outer_.prepared()),
          Tensor()};
}

}  // namespace seqtrans
