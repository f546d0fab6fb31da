// Transformer layers (post-norm or pre-norm, StackConfig::pre_norm): the encoder layer, the incremental
// decoder layer, and the norms around a stack. The layers pass the residual stream on as their sublayers do
// (SublayerNorm): a stack runs layer i with `next` = norm_after(layers, i) of its StackNorms, so that a
// pre-norm stack computes each norm of the stream with the residual sum before it.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "layers/attention.h"
#include "format/model_config.h"

namespace seqtrans {

// The layer norms around a stack, where its config has them: after the embeddings (mBART's
// layernorm_embedding, "<stack>/embedding_norm") and after the last layer (pre-norm stacks, "<stack>/final_norm").
class StackNorms {
 public:
  StackNorms() = default;
  StackNorms(const WeightLoader& weights, const std::string& stack_scope, const ModelConfig& config,
             const StackConfig& stack);
  // x: [m, d] -> [m, d]; x itself where the stack has no such norm.
  Tensor after_embedding(const Tensor& x) const { return embedding_ ? embedding_->forward(x) : x; }
  Tensor after_layers(const Tensor& x) const { return final_ ? final_->forward(x) : x; }
  // The same of the last layer's output, which holds it already where that layer folded the final norm in.
  Tensor after_layers(const ops::ResidualNorm& x) const {
    return x.normalized.defined() ? x.normalized : after_layers(x.sum);
  }
  bool has_final() const { return final_.has_value(); }
  const LayerNorm* final_norm() const { return final_ ? &*final_ : nullptr; }
  // The norm the stream goes through after layer i of the stack: the next layer's input norm, or the final
  // norm after the last; null where none is on the stream there (post-norm layers, no final norm).
  template <typename Layer>
  const LayerNorm* norm_after(const std::vector<Layer>& layers, size_t i) const {
    if (i + 1 < layers.size()) return layers[i + 1].input_norm();
    return final_ ? &*final_ : nullptr;
  }

 private:
  std::optional<LayerNorm> embedding_;
  std::optional<LayerNorm> final_;
};

class EncoderLayer {
 public:
  EncoderLayer(const WeightLoader& weights, const std::string& scope, const ModelConfig& config);
  // x: [b*t, d]; lengths: [b] -> [b*t, d].
  ops::ResidualNorm forward(const ops::ResidualNorm& x, int64_t batch, const Tensor& lengths,
                            const LayerNorm* next) const;
  // Packed tokens x [n, d] (SelfAttention::forward_packed) -> [n, d].
  ops::ResidualNorm forward_packed(const ops::ResidualNorm& x, const PackedTokens& packed, const LayerNorm* next) const;
  const LayerNorm* input_norm() const { return self_attention_.input_norm(); }

 private:
  SelfAttention self_attention_;
  FeedForward ffn_;
};

// Decoder tensors of one layer. Keys and values never move once written: the self-attention cache is
// read through the history table (beam reorders permute only that), the encoder memory through each
// slot's sentence (the beams of a sentence share it).
struct DecoderLayerCache {
  Tensor self_keys;     // [blocks, B, d]: a slot's key for position t in block history[slot, t], at t % B
  Tensor self_values;   // [blocks, B, d]
  // The encoder memory pool [positions, 1, d]: a sentence's keys at its run of positions (read through
  // key_rows with a key span).
  Tensor cross_keys;
  Tensor cross_values;
};

// Per-step inputs shared by every decoder layer.
struct DecoderStepInputs {
  const Tensor& positions;       // [s] int32, where this step's token sits
  const Tensor& key_lengths;     // [s] int32, positions + 1
  Tensor& history;               // [s, capacity] int32: the cache row holding each slot's key t
  const Tensor& memory_starts;   // [s] int32: where each slot's sentence's run starts in the memory pool
  const Tensor& source_lengths;  // [s] int32: its length
  int64_t source_span = 0;       // the longest run cross-attention reads (at least every source length)
  // [s] int32: the cache block each slot writes. Null: slot s writes row s of whole-row caches, the block
  // layout with one block per slot; the models always pass blocks, the op tests build whole rows by hand.
  const Tensor* cache_rows = nullptr;
};

class DecoderLayer {
 public:
  DecoderLayer(const WeightLoader& weights, const std::string& scope, const ModelConfig& config);
  // Projects the encoder output of packed tokens [n, d] and writes token i's key and value at position
  // pool_positions[i] ([n] int32) of the memory pool (cache.cross_keys/values).
  void project_memory_into(const Tensor& encoder_output, const Tensor& pool_positions,
                           DecoderLayerCache& cache) const;
  // x: [s, d] -> [s, d]; appends this step's keys and values to the cache.
  ops::ResidualNorm step(const ops::ResidualNorm& x, DecoderLayerCache& cache, const DecoderStepInputs& inputs,
                         const LayerNorm* next) const;
  const LayerNorm* input_norm() const { return self_attention_.input_norm(); }
  // Its weights and `cache` as the persistent step reads them (ops::persistent_decoder_step).
  ops::PersistentDecoderLayer describe(DecoderLayerCache& cache) const;

 private:
  SelfAttention self_attention_;
  CrossAttention cross_attention_;
  FeedForward ffn_;
};

}  // namespace seqtrans
