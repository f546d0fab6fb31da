// A decoder-only (Llama-style) layer: RMS pre-norms, self-attention with rotary positions and grouped-query
// heads, and a gated (SwiGLU) feed-forward, with or without biases. Its keys and values live in the row pool's
// blocks: prompt tokens and decoding steps both write them there and read them back through a history table.
#pragma once

#include <memory>
#include <string>

#include "format/model_config.h"
#include "layers/dense.h"
#include "layers/weights.h"
#include "ops/ops.h"

namespace seqtrans {

// The tokens one pass of the layers computes: a decoding step's slots, or the prompt tokens being
// prefilled (one row each). Every tensor is [n] int32 unless said.
struct CausalPass {
  const Tensor& positions;    // each token's position
  const Tensor& key_lengths;  // positions + 1: a token attends to its sequence's keys up to itself
  const Tensor& cache_rows;   // the block each token's key and value go to (negative: none, a padding row)
  Tensor& history;            // [R, T] int32: the block of each history row's key t
  // The history row each token records its block in and reads its keys through (prefill: its sequence's);
  // null: token i uses row i (a step, whose rows are its slots).
  const Tensor* history_rows = nullptr;
  const Tensor* rotary = nullptr;  // [positions, head_dim] fp32, ops::rotary_table
  // With history_rows: each prompt's tokens of the pass in tiles (ops::attention_query_tiles), so that the
  // attention reads a prompt's keys once per tile of its queries.
  const Tensor* query_tiles = nullptr;
  // With history_rows: each token's copy of its row, gathered by the first layer after its append wrote the
  // pass's blocks. Every layer writes the same blocks, so the later layers read this copy instead of
  // gathering [tokens, T] again.
  mutable Tensor key_rows;
};

class CausalLayer {
 public:
  CausalLayer(const WeightLoader& weights, const std::string& scope, const ModelConfig& config);

  // x: the residual stream [n, d] (x.sum), with its attention norm where the layer before computed it
  // (x.normalized, else undefined) -> the stream after the layer, with `next` of it (the next layer's
  // attention norm, or the stack's final norm) where given: the last residual sum and that norm are one
  // kernel instead of two, with the same bits (a model without feed-forward biases). Writes the tokens' keys
  // and values into the blocks ([blocks, B, kv heads * head_dim]). keys_only: the caller needs only the keys
  // and values (the last layer of a prefill), and the layer skips what comes after them; the result is then
  // undefined.
  ops::ResidualNorm forward(const ops::ResidualNorm& x, Tensor& key_blocks, Tensor& value_blocks,
                            const CausalPass& pass, const ops::RmsNormWeights* next = nullptr,
                            bool keys_only = false) const;
  ops::RmsNormWeights attention_norm() const { return {attention_norm_, epsilon_}; }

 private:
  // The attention norm of x, its QKV projection, and the tokens' query rows, keys and values where `append`
  // puts them (ops::project_self_attention_step: one kernel for one row of a model without attention biases).
  Tensor project_queries(const ops::ResidualNorm& x, const ops::SelfAttentionStepCaches& caches,
                         const ops::SelfAttentionStepOptions& append) const;

  int num_heads_ = 0, num_kv_heads_ = 0, head_dim_ = 0;
  float epsilon_ = 1e-5f;
  Tensor attention_norm_;  // [d]
  // The projections' biases exist where the model has them (config.attention_bias, config.ffn_bias).
  Dense qkv_;              // [(heads + 2 kv heads) * head_dim, d]: queries, keys, values
  Dense output_;           // [d, heads * head_dim]
  Tensor ffn_norm_;        // [d]
  Dense inner_;            // [2 ffn, d]: the gate's rows, then the up projection's
  Dense outer_;            // [d, ffn]
  Tensor outer_sum_bias_;  // what joins outer_'s residual sum: its bias, or zeros where the model has none
};

}  // namespace seqtrans
