// Post-norm Transformer layers: the encoder layer and the incremental decoder layer.
#pragma once

#include <string>

#include "layers/attention.h"
#include "models/model_config.h"

namespace seqtrans {

class EncoderLayer {
 public:
  EncoderLayer(const WeightLoader& weights, const std::string& scope, const ModelConfig& config);
  // x: [b*t, d]; lengths: [b] -> [b*t, d].
  Tensor forward(const Tensor& x, int64_t batch, const Tensor& lengths) const;

 private:
  SelfAttention self_attention_;
  FeedForward ffn_;
};

// Per-slot decoder tensors of one layer: the growing self-attention cache and the fixed encoder memory.
struct DecoderLayerCache {
  Tensor self_keys;     // [s, capacity, d]
  Tensor self_values;   // [s, capacity, d]
  Tensor cross_keys;    // [s, source_len, d]
  Tensor cross_values;  // [s, source_len, d]
};

// Per-step inputs shared by every decoder layer.
struct DecoderStepInputs {
  const Tensor& positions;       // [s] int32, where this step's token sits
  const Tensor& key_lengths;     // [s] int32, positions + 1
  const Tensor& source_lengths;  // [s] int32
};

class DecoderLayer {
 public:
  DecoderLayer(const WeightLoader& weights, const std::string& scope, const ModelConfig& config);
  // Fills cache.cross_keys/values from the encoder output [b*t, d].
  void project_memory(const Tensor& encoder_output, int64_t batch, DecoderLayerCache& cache) const;
  // x: [s, d] -> [s, d]; appends this step's keys and values to the cache.
  Tensor step(const Tensor& x, DecoderLayerCache& cache, const DecoderStepInputs& inputs) const;

 private:
  SelfAttention self_attention_;
  CrossAttention cross_attention_;
  FeedForward ffn_;
};

}  // namespace seqtrans
