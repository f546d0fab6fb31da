#include "layers/transformer.h"

namespace seqtrans {

namespace {

NormPlacement placement_of(const StackConfig& stack) { return stack.pre_norm ? NormPlacement::Pre : NormPlacement::Post; }

SublayerNormShape norm_shape(const ModelConfig& config, const StackConfig& stack) {
  return {config.layer_norm_epsilon, placement_of(stack)};
}

// With int8 weights the model computes approximately anyway: its softmax may too (AttentionShape).
AttentionShape attention_shape(const ModelConfig& config, const StackConfig& stack, const WeightLoader& weights) {
  return {config.d_model, stack.num_heads, norm_shape(config, stack), weights.dense_format() == ops::WeightFormat::Int8};
}

}  // namespace

StackNorms::StackNorms(const WeightLoader& weights, const std::string& stack_scope, const ModelConfig& config,
                       const StackConfig& stack) {
  if (stack.embedding_layer_norm)
    embedding_.emplace(weights, stack_scope + "/embedding_norm", config.d_model, config.layer_norm_epsilon);
  if (stack.final_layer_norm) final_.emplace(weights, stack_scope + "/final_norm", config.d_model, config.layer_norm_epsilon);
}

EncoderLayer::EncoderLayer(const WeightLoader& weights, const std::string& scope, const ModelConfig& config)
    : self_attention_(weights, scope + "/self_attention", attention_shape(config, config.encoder, weights)),
      ffn_(weights, scope + "/ffn", config.d_model, config.encoder.ffn_dim, config.activation,
           norm_shape(config, config.encoder)) {}

ops::ResidualNorm EncoderLayer::forward(const ops::ResidualNorm& x, int64_t batch, const Tensor& lengths,
                                        const LayerNorm* next) const {
  return ffn_.forward(self_attention_.forward(x, batch, lengths, ffn_.input_norm()), next);
}

ops::ResidualNorm EncoderLayer::forward_packed(const ops::ResidualNorm& x, const PackedTokens& packed,
                                               const LayerNorm* next) const {
  return ffn_.forward(self_attention_.forward_packed(x, packed, ffn_.input_norm()), next);
}

DecoderLayer::DecoderLayer(const WeightLoader& weights, const std::string& scope, const ModelConfig& config)
    : self_attention_(weights, scope + "/self_attention", attention_shape(config, config.decoder, weights)),
      cross_attention_(weights, scope + "/cross_attention", attention_shape(config, config.decoder, weights)),
      ffn_(weights, scope + "/ffn", config.d_model, config.decoder.ffn_dim, config.activation,
           norm_shape(config, config.decoder)) {}

void DecoderLayer::project_memory_into(const Tensor& encoder_output, const Tensor& pool_positions,
                                       DecoderLayerCache& cache) const {
  Tensor keys, values;  // [n, d]
  cross_attention_.project_memory(encoder_output, keys, values);
  const int64_t tokens = keys.dim(0), d = keys.dim(1);
  ops::scatter_prefix(keys.reshape({tokens, 1, d}), pool_positions, cache.cross_keys);
  ops::scatter_prefix(values.reshape({tokens, 1, d}), pool_positions, cache.cross_values);
}

ops::ResidualNorm DecoderLayer::step(const ops::ResidualNorm& x, DecoderLayerCache& cache,
                                     const DecoderStepInputs& inputs, const LayerNorm* next) const {
  const ops::ResidualNorm after_self =
      self_attention_.step(x, cache.self_keys, cache.self_values, inputs, cross_attention_.input_norm());
  const ops::ResidualNorm after_cross =
      cross_attention_.step(after_self, cache.cross_keys, cache.cross_values, inputs, ffn_.input_norm());
  return ffn_.forward(after_cross, next);
}

ops::PersistentDecoderLayer DecoderLayer::describe(DecoderLayerCache& cache) const {
  ops::PersistentDecoderLayer layer{};
  self_attention_.describe(layer);
  cross_attention_.describe(layer);
  ffn_.describe(layer);
  layer.self_keys = &cache.self_keys;
  layer.self_values = &cache.self_values;
  layer.cross_keys = &cache.cross_keys;
  layer.cross_values = &cache.cross_values;
  return layer;
}

}  // namespace seqtrans
