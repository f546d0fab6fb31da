// The encoder-decoder Transformer (Marian / OPUS-MT architecture) behind the StepModel interface.
#pragma once

#include <memory>
#include <vector>

#include "layers/transformer.h"
#include "models/model_file.h"
#include "search/step_model.h"

namespace seqtrans {

struct ModelOptions {
  Device device = Device::CPU;
  DataType dtype = DataType::F32;  // compute and weight type on the device
  ops::TopkAlgorithm topk_algorithm = ops::TopkAlgorithm::Auto;
  // false: copy the full logits to the host and select there (the benchmark's --no-fused-topk ablation).
  bool fused_output = true;
};

class EncoderDecoderModel : public StepModel {
 public:
  EncoderDecoderModel(const ModelFile& file, const ModelOptions& options);

  const ModelConfig& config() const { return config_; }
  Device device() const { return options_.device; }

  int64_t target_vocab_size() const override { return config_.target_vocab_size; }
  int32_t eos_id() const override { return config_.eos_id; }
  int32_t decoder_start_id() const override { return config_.decoder_start_id; }
  std::vector<int32_t> suppressed_ids() const override { return config_.suppressed_ids; }
  // Decoder positions bound the output: the start token takes position 0.
  int max_target_length() const override { return config_.max_positions; }

  std::unique_ptr<DecoderState> encode(const std::vector<std::vector<int32_t>>& sources) override;
  Tensor step(DecoderState& state, const std::vector<int32_t>& input_ids) override;
  void step_candidates(DecoderState& state, const std::vector<int32_t>& input_ids, const CandidateRequest& request,
                       StepCandidates& candidates) override;
  void select(DecoderState& state, const std::vector<int32_t>& sources) override;

  // Encoder output for a batch, [b, t, d] with t the longest source; exposed for tests.
  Tensor encode_tensor(const std::vector<std::vector<int32_t>>& sources, Tensor& lengths) const;

 private:
  enum class Side { Source, Target };
  // Token embeddings of one side, scaled, plus its position encodings. ids, positions: [n] -> [n, d].
  Tensor embed(const Tensor& ids, const Tensor& positions, Side side) const;
  // Runs the decoder layers for one step; returns the top layer's output [slots, d].
  Tensor decode(DecoderState& state, const std::vector<int32_t>& input_ids);

  ModelConfig config_;
  ModelOptions options_;
  Tensor source_embedding_;  // [V_src, d]
  Tensor target_embedding_;  // [V_tgt, d]
  Tensor source_positions_;  // [max_positions, d], learned positions only
  Tensor target_positions_;
  Tensor output_weight_;     // [V_tgt, d]
  Tensor output_bias_;       // [V_tgt], undefined when the model has none
  std::vector<int32_t> suppressed_host_;  // the last suppressed-id list and its device copy
  Tensor suppressed_device_;
  std::vector<EncoderLayer> encoder_layers_;
  std::vector<DecoderLayer> decoder_layers_;
};

}  // namespace seqtrans
