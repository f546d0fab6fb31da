#include "layers/attention.h"

#include <cmath>

#include "layers/transformer.h"

namespace seqtrans {
namespace {

ops::AttentionOptions attention_options(const AttentionShape& shape) {
  const float head_dim = static_cast<float>(shape.d_model / shape.num_heads);
  ops::AttentionOptions options{shape.num_heads, 1.0f / std::sqrt(head_dim)};
  options.approximate_exp = shape.approximate_exp;
  return options;
}

}  // namespace

SelfAttention::SelfAttention(const WeightLoader& weights, const std::string& scope, const AttentionShape& shape)
    : shape_(shape),
      qkv_(weights, scope + "/qkv", shape.d_model, 3 * shape.d_model),
      output_(weights, scope + "/output", shape.d_model, shape.d_model),
      norm_(weights, scope + "/norm", shape.d_model, shape.norm) {}

ops::ResidualNorm SelfAttention::attend(const Tensor& context, const Tensor& residual, const LayerNorm* next) const {
  return norm_.output(output_, context, residual, next);
}

ops::ResidualNorm SelfAttention::forward(const ops::ResidualNorm& x, int64_t batch, const Tensor& lengths,
                                         const LayerNorm* next) const {
  const int64_t tokens = x.sum.dim(0), time = tokens / batch, d = shape_.d_model;
  const std::vector<Tensor> qkv = ops::add_bias_split(qkv_.project(norm_.input(x)), qkv_.bias(), 3);  // 3 x [b*t, d]
  const Tensor context = ops::attention(qkv[0].reshape({batch, time, d}), qkv[1].reshape({batch, time, d}),
                                        qkv[2].reshape({batch, time, d}), lengths, attention_options(shape_));
  return attend(context.reshape({tokens, d}), x.sum, next);
}

ops::ResidualNorm SelfAttention::forward_packed(const ops::ResidualNorm& x, const PackedTokens& packed,
                                                const LayerNorm* next) const {
  const int64_t tokens = x.sum.dim(0), d = shape_.d_model;
  const std::vector<Tensor> qkv = ops::add_bias_split(qkv_.project(norm_.input(x)), qkv_.bias(), 3);  // 3 x [n, d]
  // Each token a query row of its own; its keys are a span of the packed tokens, from its sentence's first.
  ops::AttentionOptions options = attention_options(shape_);
  options.key_rows = &packed.key_starts;
  options.key_span = packed.longest;
  options.query_tiles = &packed.query_tiles;
  const Tensor context = ops::attention(qkv[0].reshape({tokens, 1, d}), qkv[1].reshape({tokens, 1, d}),
                                        qkv[2].reshape({tokens, 1, d}), packed.key_lengths, options);
  return attend(context.reshape({tokens, d}), x.sum, next);
}

ops::ResidualNorm SelfAttention::step(const ops::ResidualNorm& x, Tensor& key_cache, Tensor& value_cache,
                                      const DecoderStepInputs& inputs, const LayerNorm* next) const {
  const int64_t slots = x.sum.dim(0), d = shape_.d_model;
  ops::SelfAttentionStepOptions append;
  append.cache_rows = inputs.cache_rows;
  const Tensor query = norm_.project_self_attention_step(
      x, qkv_, {inputs.positions, key_cache, value_cache, inputs.history}, append);
  ops::AttentionOptions options = attention_options(shape_);
  options.key_rows = &inputs.history;
  const Tensor context =
      ops::attention(query.reshape({slots, 1, d}), key_cache, value_cache, inputs.key_lengths, options);
  return attend(context.reshape({slots, d}), x.sum, next);
}

void SelfAttention::describe(ops::PersistentDecoderLayer& layer) const {
  layer.qkv_weight = &qkv_.weight();
  layer.qkv_bias = &qkv_.bias();
  layer.self_output_weight = &output_.weight();
  layer.self_output_bias = &output_.bias();
  layer.self_gamma = &norm_.norm().gamma();
  layer.self_beta = &norm_.norm().beta();
}

CrossAttention::CrossAttention(const WeightLoader& weights, const std::string& scope, const AttentionShape& shape)
    : shape_(shape),
      query_(weights, scope + "/query", shape.d_model, shape.d_model),
      kv_(weights, scope + "/kv", shape.d_model, 2 * shape.d_model),
      output_(weights, scope + "/output", shape.d_model, shape.d_model),
      norm_(weights, scope + "/norm", shape.d_model, shape.norm) {}

void CrossAttention::project_memory(const Tensor& encoder_output, Tensor& keys, Tensor& values) const {
  std::vector<Tensor> kv = ops::add_bias_split(kv_.project(encoder_output), kv_.bias(), 2);
  keys = kv[0];
  values = kv[1];
}

ops::ResidualNorm CrossAttention::step(const ops::ResidualNorm& x, const Tensor& keys, const Tensor& values,
                                       const DecoderStepInputs& inputs, const LayerNorm* next) const {
  const int64_t slots = x.sum.dim(0), d = shape_.d_model;
  const Tensor query = norm_.product_of_input(x, query_, query_.options(true));
  ops::AttentionOptions options = attention_options(shape_);
  options.key_rows = &inputs.memory_starts;
  options.key_span = inputs.source_span;
  const Tensor context =
      ops::attention(query.reshape({slots, 1, d}), keys, values, inputs.source_lengths, options);
  return norm_.output(output_, context.reshape({slots, d}), x.sum, next);
}

void CrossAttention::describe(ops::PersistentDecoderLayer& layer) const {
  layer.cross_query_weight = &query_.weight();
  layer.cross_query_bias = &query_.bias();
  layer.cross_output_weight = &output_.weight();
  layer.cross_output_bias = &output_.bias();
  layer.cross_gamma = &norm_.norm().gamma();
  layer.cross_beta = &norm_.norm().beta();
}

FeedForward::FeedForward(const WeightLoader& weights, const std::string& scope, int64_t d_model, int64_t ffn_dim,
                         Activation activation, const SublayerNormShape& norm)
    : inner_(weights, scope + "/inner", d_model, ffn_dim),
      outer_(weights, scope + "/outer", ffn_dim, d_model),
      norm_(weights, scope + "/norm", d_model, norm),
      activation_(activation) {}

ops::ResidualNorm FeedForward::forward(const ops::ResidualNorm& x, const LayerNorm* next) const {
  const Tensor hidden = norm_.product_of_input(x, inner_, inner_.options(true, activation_));
  return norm_.output(outer_, hidden, x.sum, next);
}

void FeedForward::describe(ops::PersistentDecoderLayer& layer) const {
  layer.inner_weight = &inner_.weight();
  layer.inner_bias = &inner_.bias();
  layer.outer_weight = &outer_.weight();
  layer.outer_bias = &outer_.bias();
  layer.ffn_gamma = &norm_.norm().gamma();
  layer.ffn_beta = &norm_.norm().beta();
}

}  // namespace seqtrans
