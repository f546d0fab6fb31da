// A decoder-only Transformer (Llama family) behind the StepModel interface, on the same row pool and step
// runner as the encoder-decoder model. A sequence's "source" is its prompt: its prefill writes the keys and
// values of all its tokens but the last into the row pool's blocks (a packed causal pass over every prompt
// being prefilled), and the first step feeds the last one, so that step's output is the first generated
// token. The prefill goes in chunks (EngineTuning::prefill_chunk_tokens): admit() takes the prompts in, each
// continue_admission() writes one chunk and joins the prompts it completes, in the order admitted. A chunk only
// bounds the wait of rows decoding: with none, or with a burst of prompts waiting, a pass takes up to
// kPrefillPassTokens.
#pragma once

#include <algorithm>
#include <memory>
#include <vector>

#include "layers/causal_layer.h"
#include "models/pooled_model.h"
#include "models/output_head.h"
#include "models/step_runner.h"

namespace seqtrans {

class DecoderOnlyState;

class DecoderOnlyModel : public PooledModel {
 public:
  DecoderOnlyModel(const ModelFile& file, const ModelOptions& options);

  const ModelConfig& config() const { return config_; }

  int64_t target_vocab_size() const override { return config_.target_vocab_size; }
  int32_t eos_id() const override { return config_.eos_id; }
  // What the searches feed first; the model feeds each prompt's last token in its place (fill_step_inputs).
  int32_t decoder_start_id() const override { return config_.bos_id; }
  std::vector<int32_t> suppressed_ids() const override { return config_.suppressed_ids; }
  bool prompt_in_history() const override { return true; }
  // The prompt takes its positions but the last, which the first step feeds.
  int max_target_length(size_t prompt_length) const override {
    return std::max(1, config_.max_positions - static_cast<int>(prompt_length) + 1);
  }

  std::unique_ptr<DecoderState> start() override;
  void admit(DecoderState& state, const std::vector<std::vector<int32_t>>& prompts) override;
  void continue_admission(DecoderState& state) override;
  void withdraw_admitting(DecoderState& state, size_t count) override;
  void reserve(DecoderState& state, const DecoderReservation& reservation) const override;
  void select(DecoderState& state, const std::vector<int32_t>& sources) override;

 private:
  // One pass of the prefill: the next at most `tokens` prompt tokens whose keys and values are not written
  // yet, oldest prompt first, into their sequences' first lanes (the last layer's feed-forward skipped: only
  // keys and values are kept). A pass that fails leaves every prompt's progress as it was.
  void prefill_pass(DecoderOnlyState& state, int64_t tokens) const;
  // The prompts at the front whose prefill is complete join as slots after the current ones, their history
  // rows written from their lanes.
  void join_prefilled(DecoderOnlyState& state) const;
  // The layers and the final norm over a step's `rows` rows: device work only, so that a graph can record it.
  Tensor decode(DecoderOnlyState& state, int64_t rows) const;

  // PooledModel
  StepRunner& runner(DecoderState& state) const override;
  Tensor hidden_rows(DecoderState& state, int64_t rows) const override { return decode(state_of(state), rows); }
  const OutputHead& output_head() const override { return output_head_; }
  static DecoderOnlyState& state_of(DecoderState& state);

  // StepSource
  RowPool& row_pool(DecoderState& state) const override;
  int64_t layout(DecoderState& state) const override;
  int64_t max_positions() const override { return config_.max_positions; }
  void fill_step_inputs(DecoderState& state, const std::vector<int32_t>& input_ids, int32_t* inputs) const override;
  void decode_and_select(DecoderState& state, int64_t rows, int k, const RepetitionRequest* repetitions,
                         Tensor& values, Tensor& ids) const override;

  ops::RmsNormWeights final_norm() const { return {final_norm_, config_.layer_norm_epsilon}; }
  // The norm the stream goes through after `layer`: the next layer's attention norm, or the final norm.
  ops::RmsNormWeights norm_after(size_t layer) const {
    return layer + 1 < layers_.size() ? layers_[layer + 1].attention_norm() : final_norm();
  }

  ModelConfig config_;
  Tensor embedding_;   // [V, d]
  Tensor final_norm_;  // [d], RMS norm's weight
  Tensor rotary_;      // [max_positions, head_dim] fp32 (ops::rotary_table)
  OutputHead output_head_;
  std::vector<CausalLayer> layers_;
};

}  // namespace seqtrans
