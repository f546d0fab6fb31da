// The encoder-decoder Transformer (Marian / OPUS-MT architecture) behind the StepModel interface.
#pragma once

#include <memory>
#include <vector>

#include "layers/transformer.h"
#include "models/pooled_model.h"
#include "format/model_file.h"
#include "models/output_head.h"
#include "models/step_runner.h"
#include "search/step_model.h"

namespace seqtrans {

class EncoderDecoderState;

// Its StepSource side is what the shared step runner drives (models/step_runner.h).
class EncoderDecoderModel : public PooledModel {
 public:
  EncoderDecoderModel(const ModelFile& file, const ModelOptions& options);

  const ModelConfig& config() const { return config_; }
  Device device() const { return options_.device; }

  int64_t target_vocab_size() const override { return config_.target_vocab_size; }
  int32_t eos_id() const override { return config_.eos_id; }
  int32_t decoder_start_id() const override { return config_.decoder_start_id; }
  std::vector<int32_t> suppressed_ids() const override { return config_.suppressed_ids; }
  // Decoder positions bound the output: the start token takes position 0.
  int max_target_length(size_t) const override { return config_.max_positions; }

  std::unique_ptr<DecoderState> start() override;
  void admit(DecoderState& state, const std::vector<std::vector<int32_t>>& sources) override;
  void reserve(DecoderState& state, const DecoderReservation& reservation) const override;
  void select(DecoderState& state, const std::vector<int32_t>& sources) override;

  // Encoder output for a batch: padded to the longest source, [b, t, d] (encode_tensor; positions past a
  // source's length are junk), or packed without padding, the sources' tokens one after another, [n, d]
  // (encode_packed).
  Tensor encode_tensor(const std::vector<std::vector<int32_t>>& sources, Tensor& lengths) const;
  Tensor encode_packed(const std::vector<std::vector<int32_t>>& sources) const;

 private:
  enum class Side { Source, Target };
  // Token embeddings of one side, scaled, plus its position encodings. ids, positions: [n] -> [n, d].
  Tensor embed(const Tensor& ids, const Tensor& positions, Side side) const;
  // Encodes `sources` a pass of at most kEncoderPassTokens at a time, and writes each pass's keys and values
  // for cross-attention into the memory pool at `pool_positions` (one per source token, in order).
  void encode_into_memory(EncoderDecoderState& state, const std::vector<std::vector<int32_t>>& sources,
                          const std::vector<int32_t>& pool_positions) const;
  // The encoder output of joining sentences as packed tokens [n, d], whichever encoder the options pick.
  Tensor encode_joining(const std::vector<std::vector<int32_t>>& sources) const;
  // The layers for one step over `rows` rows: device work only, so a graph can record it. x: the top
  // layer's output [rows, d]; selected: the persistent kernel also ran the output layer of `greedy` (given
  // for greedy steps), whose values and ids then hold the step's choices.
  struct DecodedStep {
    Tensor x;
    bool selected = false;
  };
  DecodedStep decode(EncoderDecoderState& state, int64_t rows, const ops::PersistentGreedyOutput* greedy = nullptr) const;
  // Every decoder layer of the step in the persistent kernel, where it runs this step (x becomes the output),
  // and the output layer of `greedy` with them where the kernel can fold it in (`selected` says so).
  bool persistent_layers(EncoderDecoderState& state, Tensor& x, const DecoderStepInputs& inputs, const Tensor& reorder,
                         const ops::PersistentGreedyOutput* greedy, bool& selected) const;

  // PooledModel
  StepRunner& runner(DecoderState& state) const override;
  Tensor hidden_rows(DecoderState& state, int64_t rows) const override { return decode(state_of(state), rows).x; }
  const OutputHead& output_head() const override { return output_head_; }
  static EncoderDecoderState& state_of(DecoderState& state);

  // StepSource
  RowPool& row_pool(DecoderState& state) const override;
  int64_t layout(DecoderState& state) const override;
  int64_t max_positions() const override { return config_.max_positions; }
  void fill_step_inputs(DecoderState& state, const std::vector<int32_t>& input_ids, int32_t* inputs) const override;
  void decode_and_select(DecoderState& state, int64_t rows, int k, const RepetitionRequest* repetitions,
                         Tensor& values, Tensor& ids) const override;

  ModelConfig config_;
  Tensor source_embedding_;  // [V_src, d]
  Tensor target_embedding_;  // [V_tgt, d]
  // [max_positions + position_offset, d]: learned positions, or fairseq sinusoids evaluated once (both read
  // as a table: ops::EmbeddingOptions::position_table).
  Tensor source_positions_;
  Tensor target_positions_;
  Tensor sinusoids_;  // [max_positions, d] fp32, Marian sinusoids only (ops::sinusoid_table)
  StackNorms source_norms_;  // around the encoder: after its embeddings, after its last layer
  StackNorms target_norms_;  // around the decoder
  OutputHead output_head_;   // the output weight [V_tgt, d] (the target embedding when tied) and bias
  std::vector<EncoderLayer> encoder_layers_;
  std::vector<DecoderLayer> decoder_layers_;
};

}  // namespace seqtrans
