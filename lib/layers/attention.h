// Multi-head attention and feed-forward sublayers of a Transformer, post-norm (Marian) or pre-norm (mBART,
// M2M-100/NLLB): SublayerNorm places the norm. Each takes the residual stream x and gives it back as
// SublayerNorm::output does, `next` the norm the stream goes through after it (null: none to fold in).
#pragma once

#include <string>

#include "layers/dense.h"

namespace seqtrans {

struct DecoderStepInputs;  // layers/transformer.h


struct AttentionShape {
  int64_t d_model = 0;
  int num_heads = 0;
  SublayerNormShape norm;
  bool approximate_exp = false;  // ops::AttentionOptions::approximate_exp
};

// Sentences packed token after token (the packed encoder, no padding): token q attends to the key_lengths[q]
// tokens from token key_starts[q] on ([n] int32 each; none longer than `longest`); query_tiles groups each
// sentence's tokens (ops::attention_query_tiles).
struct PackedTokens {
  const Tensor& key_starts;
  const Tensor& key_lengths;
  const Tensor& query_tiles;
  int64_t longest;
};

// Self-attention with fused QKV projection, residual and layer norm.
class SelfAttention {
 public:
  SelfAttention() = default;
  SelfAttention(const WeightLoader& weights, const std::string& scope, const AttentionShape& shape);

  // Whole-sequence form (encoder). x: [b, t, d] as [b*t, d]; lengths: [b] -> [b*t, d].
  ops::ResidualNorm forward(const ops::ResidualNorm& x, int64_t batch, const Tensor& lengths,
                            const LayerNorm* next) const;
  // Packed form (encoder, no padding): x [n, d] holds the sentences' tokens one after another -> [n, d].
  ops::ResidualNorm forward_packed(const ops::ResidualNorm& x, const PackedTokens& packed, const LayerNorm* next) const;
  // One decoding step against a per-slot cache. x: [s, d]; caches: [s, capacity, d]; this step's key and
  // value go to (slot, position) and the history table records it.
  ops::ResidualNorm step(const ops::ResidualNorm& x, Tensor& key_cache, Tensor& value_cache,
                         const DecoderStepInputs& inputs, const LayerNorm* next) const;
  const LayerNorm* input_norm() const { return norm_.input_norm(); }
  // Its tensors in the persistent step's description of a layer (the self-attention ones).
  void describe(ops::PersistentDecoderLayer& layer) const;

 private:
  ops::ResidualNorm attend(const Tensor& context, const Tensor& residual, const LayerNorm* next) const;

  AttentionShape shape_;
  Dense qkv_;
  Dense output_;
  SublayerNorm norm_;
};

// Decoder attention over the encoder output; keys and values are projected once per sentence.
class CrossAttention {
 public:
  CrossAttention() = default;
  CrossAttention(const WeightLoader& weights, const std::string& scope, const AttentionShape& shape);

  // encoder_output: [n, d] -> keys, values [n, d].
  void project_memory(const Tensor& encoder_output, Tensor& keys, Tensor& values) const;
  // x: [s, d]; keys, values: the memory pool [positions, 1, d], read over each slot's run -> [s, d].
  ops::ResidualNorm step(const ops::ResidualNorm& x, const Tensor& keys, const Tensor& values,
                         const DecoderStepInputs& inputs, const LayerNorm* next) const;
  const LayerNorm* input_norm() const { return norm_.input_norm(); }
  void describe(ops::PersistentDecoderLayer& layer) const;  // the cross-attention tensors

 private:
  AttentionShape shape_;
  Dense query_;
  Dense kv_;
  Dense output_;
  SublayerNorm norm_;
};

// Position-wise feed-forward block: norm(x + W2 act(W1 x + b1) + b2) (post-norm) or
// x + W2 act(W1 norm(x) + b1) + b2 (pre-norm).
class FeedForward {
 public:
  FeedForward() = default;
  FeedForward(const WeightLoader& weights, const std::string& scope, int64_t d_model, int64_t ffn_dim,
              Activation activation, const SublayerNormShape& norm);

  ops::ResidualNorm forward(const ops::ResidualNorm& x, const LayerNorm* next) const;  // [m, d] -> [m, d]
  const LayerNorm* input_norm() const { return norm_.input_norm(); }
  void describe(ops::PersistentDecoderLayer& layer) const;  // the feed-forward tensors

 private:
  Dense inner_;
  Dense outer_;
  SublayerNorm norm_;
  Activation activation_ = Activation::Relu;
};

}  // namespace seqtrans
