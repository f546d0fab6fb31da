// The encoder-decoder Transformer (Marian / OPUS-MT architecture) behind the StepModel interface.
#pragma once

#include <memory>
#include <vector>

#include "layers/transformer.h"
#include "models/model_file.h"
#include "models/output_head.h"
#include "search/step_model.h"

namespace seqtrans {

// Decoder steps of at most this many rows run through the persistent decoder kernel by default: the measured
// crossovers (Transformer-base 32 -> 32, docs/BENCHMARKS.md). In fp16 its products run on tensor cores from
// 3 rows; against the layer-by-layer graph it is ahead up to 8 rows and about even at 16 (H100: 1.12x at 1
// row, 1.24x at 8, 1.04x at 16; H200 leases 1.06-1.17x at 1, 1.12-1.14x at 4, 0.98-1.08x at 16); fp32
// products run on CUDA cores, ahead at 1 and 2 rows only (H200: 1.11x, 1.09x; 0.56x at 16, where every
// warp re-reads each input row per output column).
inline constexpr int64_t kPersistentDecodeRowsF16 = 16, kPersistentDecodeRowsF32 = 2;
// ModelOptions::persistent_decode_rows: the crossover of the model's dtype.
inline constexpr int64_t kPersistentDecodeAuto = -1;
// Greedy steps run at once where ModelOptions::steps_per_read asks for it: the host's round trip (50-60 us a
// batch-1 step on an H100) is paid once for them, and a sentence that ends inside wastes at most this many
// less one. H100: 1.03-1.04x at batch 1 and 16 (synthetic), 1.10x translating newstest one sentence at a time.
inline constexpr int kGreedyStepsPerRead = 4;
// ModelOptions::steps_per_read: kGreedyStepsPerRead on CUDA, 1 on the CPU (no round trip to save there).
inline constexpr int kStepsPerReadAuto = -1;
int64_t default_persistent_decode_rows(DataType dtype);

struct ModelOptions {
  Device device = Device::CPU;
  DataType dtype = DataType::F32;  // compute and weight type on the device
  ops::TopkAlgorithm topk_algorithm = ops::TopkAlgorithm::Auto;
  // false: copy the full logits to the host and select there (the benchmark's --no-fused-topk ablation).
  bool fused_output = true;
  // Replay each decoder step as one CUDA graph (CUDA with fused_output only; off while profiling, whose
  // per-stage synchronization a graph cannot hold). false: launch every op (--no-cuda-graphs).
  bool cuda_graphs = true;
  // Encode joining sentences packed, with no padding tokens: GEMMs over their concatenated tokens,
  // attention per sentence over a span of the packed tokens. false: padded to the longest (--no-packed-encoder).
  bool packed_encoder = true;
  // Decoder steps of at most this many rows run every layer in one persistent kernel (CUDA, shapes it
  // fits; ops::persistent_decoder_step) instead of ~12 launches a layer. 0: never (--no-persistent-decode);
  // at most ops::kPersistentDecoderMaxRows; kPersistentDecodeAuto: default_persistent_decode_rows(dtype).
  int64_t persistent_decode_rows = kPersistentDecodeAuto;
  // Greedy steps the session runs at once when nothing else needs the host in between, each fed the last
  // one's choices on the device, read back together (StepModel::steps_per_read); 1 reads every step
  // (--no-steps-at-once); kStepsPerReadAuto: the device's default.
  int steps_per_read = kStepsPerReadAuto;
  // Greedy steps that the persistent kernel runs also run the output layer in it (logits, normalizer and
  // argmax: ops::PersistentGreedyOutput) where the shape allows. false: --no-persistent-argmax.
  bool persistent_argmax = true;
};

// How decoder steps ran (fused output layer only): op by op, recorded into a new graph, or replayed.
struct StepCounts {
  int64_t launched = 0;
  int64_t captured = 0;
  int64_t replayed = 0;
  int64_t memory_compactions = 0;  // times the encoder memory pool moved the runs in flight to its front
  int64_t persistent = 0;  // steps launched or recorded through the persistent decoder kernel
  int64_t persistent_argmax = 0;  // of which with the output layer folded in (greedy)
  int64_t at_once = 0;     // steps run in groups, fed on the device (step_candidates_run)
};

class EncoderDecoderState;
struct StepOutputs;


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

  std::unique_ptr<DecoderState> start() override;
  void admit(DecoderState& state, const std::vector<std::vector<int32_t>>& sources) override;
  void reserve(DecoderState& state, const DecoderReservation& reservation) const override;
  void release_cached(DecoderState& state) const override;
  Tensor step(DecoderState& state, const std::vector<int32_t>& input_ids) override;
  void step_candidates(DecoderState& state, const std::vector<int32_t>& input_ids, const CandidateRequest& request,
                       StepCandidates& candidates) override;
  void step_samples(DecoderState& state, const std::vector<int32_t>& input_ids, const SampleRequest& request,
                    StepSamples& samples) override;
  void step_candidates_run(DecoderState& state, const std::vector<int32_t>& input_ids,
                           const std::vector<CandidateRequest>& requests,
                           std::vector<StepCandidates>& candidates) override;
  int steps_per_read() const override;
  void select(DecoderState& state, const std::vector<int32_t>& sources) override;

  const StepCounts& step_counts() const { return step_counts_; }

  // Encoder output for a batch: padded to the longest source, [b, t, d] (encode_tensor; positions past a
  // source's length are junk), or packed without padding, the sources' tokens one after another, [n, d]
  // (encode_packed).
  Tensor encode_tensor(const std::vector<std::vector<int32_t>>& sources, Tensor& lengths) const;
  Tensor encode_packed(const std::vector<std::vector<int32_t>>& sources) const;

 private:
  enum class Side { Source, Target };
  // Token embeddings of one side, scaled, plus its position encodings. ids, positions: [n] -> [n, d].
  Tensor embed(const Tensor& ids, const Tensor& positions, Side side) const;
  // Checks the step's ids, sizes the state's buffers and uploads the step's inputs; returns the rows the
  // step computes: the slots, padded up to a bucket when the step runs as a graph.
  int64_t prepare_step(EncoderDecoderState& state, const std::vector<int32_t>& input_ids, bool graph) const;
  // prepare_step's checks and sizing, for `steps` steps from the slots' positions; returns the rows.
  int64_t size_step(EncoderDecoderState& state, const std::vector<int32_t>& input_ids, bool graph, int steps) const;
  // The step's per-row inputs ([kStepInputs, state rows] int32, padding rows included) into `inputs` on the
  // host, taking each slot's cache block for its position.
  void fill_step_inputs(EncoderDecoderState& state, const std::vector<int32_t>& input_ids, int32_t* inputs) const;
  // The history table and step inputs for at least `rows` slots and `capacity` positions, keeping what was
  // written; drops the graphs recorded against the old ones when they move.
  // Encodes `sources` a pass of at most kEncoderPassTokens at a time, and writes each pass's keys and values
  // for cross-attention into the memory pool at `pool_positions` (one per source token, in order).
  void encode_into_memory(EncoderDecoderState& state, const std::vector<std::vector<int32_t>>& sources,
                          const std::vector<int32_t>& pool_positions) const;
  void grow_decoder_pool(EncoderDecoderState& state, int64_t rows, int64_t capacity) const;
  // Self-attention caches of at least `blocks` blocks, likewise.
  void grow_block_pool(EncoderDecoderState& state, int64_t blocks) const;
  // The block slot `slot` writes at its position, taken from the free list when its lane needs a new one.
  int32_t block_to_write(EncoderDecoderState& state, int64_t slot) const;
  // The encoder output of joining sentences as packed tokens [n, d], whichever encoder the options pick.
  Tensor encode_joining(const std::vector<std::vector<int32_t>>& sources) const;
  // A run of the memory pool for each source (its start), making room when the free runs do not hold them.
  std::vector<int32_t> place_memory(EncoderDecoderState& state, const std::vector<std::vector<int32_t>>& sources) const;
  // Moves the runs of the sentences in flight to the front of a pool of `positions` positions (the same
  // pool when it is not larger; a new one, dropping the graphs, when it is), so that the rest is one free run.
  void compact_memory_pool(EncoderDecoderState& state, int64_t positions) const;
  // A memory pool of at least `positions` positions.
  void grow_memory_pool(EncoderDecoderState& state, int64_t positions) const;
  // Host rows for `count` more sentences in flight (their lanes, memory run and length).
  void grow_sentence_rows(EncoderDecoderState& state, int64_t count) const;
  // The decoder layers for one step over `rows` rows: device work only, so a graph can record it. x: the top
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
  // decode() and output_layer() for one step: the rows' k best (or draws) into values and ids.
  void decode_and_select(EncoderDecoderState& state, int64_t rows, int k, const RepetitionRequest* repetitions,
                         Tensor& values, Tensor& ids) const;
  // The decoder step and output layer over `rows` rows (prepared): as a CUDA graph when `graph`, else op by op;
  // its values and ids land side by side in `outputs`.
  void run_step(EncoderDecoderState& state, int64_t rows, int k, bool graph, const RepetitionRequest& repetitions,
                StepOutputs& outputs) const;
  // step_candidates_run's device part, its steps' inputs made on the host ([steps, kStepInputs * state rows]):
  // one upload, the steps fed on the device, one download.
  void run_steps_at_once(EncoderDecoderState& state, int64_t rows, bool graph, const std::vector<int>& lists,
                         const Tensor& table, std::vector<StepCandidates>& candidates) const;
  // The step and output layer over `rows` rows as a CUDA graph: replayed if recorded; else launched op by
  // op on the shape's first step and recorded on its second (a shape met once costs no recording).
  void run_step_graph(EncoderDecoderState& state, int64_t rows, int k, StepOutputs& outputs) const;
  // What a fused step's output layer computes: the k best per slot, or (k = kSampled, draws given) one draw.
  struct OutputRequest {
    int k = 1;
    const std::vector<int32_t>* suppressed_ids = nullptr;
    const RepetitionRequest* repetitions = nullptr;
    const std::vector<ops::SamplingRow>* draws = nullptr;  // [slots]
  };
  // One decoder step through the fused output layer (as a graph when it can): the slots' values and ids,
  // [slots, k] or [slots], on the host.
  void fused_step(EncoderDecoderState& state, const std::vector<int32_t>& input_ids, const OutputRequest& request,
                  std::vector<float>& values, std::vector<int32_t>& ids) const;
  // The draws' settings into the state's sampling rows, padding rows included.
  void upload_sampling_rows(EncoderDecoderState& state, const std::vector<ops::SamplingRow>& draws) const;
  // After a step: positions advance and the pending reorder is spent.
  static void finish_step(EncoderDecoderState& state);
  bool use_graphs() const;

  ModelConfig config_;
  ModelOptions options_;
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
  // Statistics only (how steps ran, summed over every state); a step changes nothing else in the model.
  mutable StepCounts step_counts_;
  std::vector<EncoderLayer> encoder_layers_;
  std::vector<DecoderLayer> decoder_layers_;
};

}  // namespace seqtrans
