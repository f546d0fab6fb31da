#include "models/decoder_only_model.h"

#include <algorithm>
#include <numeric>

#include "core/profiler.h"
#include "models/row_pool.h"

namespace seqtrans {

namespace {

// Rows of the step inputs (the ids first: StepRunner).
enum StepInput { kIds, kPositions, kKeyLengths, kReorder, kCacheRows, kStepInputs };

// Prompt tokens per prefill pass: a longer prompt is written in several passes, each reading the keys the
// earlier ones wrote, so that the temporaries stay bounded as the encoder's passes are.
constexpr size_t kPrefillPassTokens = 8192;

}  // namespace

// Decoder state of a run: the rows and their blocks (a prompt is a sequence of the pool), the step runner,
// and per sequence row its prompt's length and last token (fed at its first step).
class DecoderOnlyState : public DecoderState {
 public:
  DecoderOnlyState(const ModelConfig& config, const ModelOptions& options, bool graphs, StepCounts* counts)
      : rows(static_cast<size_t>(config.decoder.num_layers),
             int64_t{key_value_heads(config.decoder)} * head_width(config, config.decoder), options.dtype,
             options.device),
        runner(options.device, kStepInputs, config.target_vocab_size, graphs, counts) {}

  int64_t slots() const override { return rows.slots(); }
  // A sequence is expected to reach its prompt's length plus as many tokens again.
  int64_t room_left() const override { return rows.room_left(reach); }
  int64_t room_needed(int64_t new_slots, int64_t new_positions) const override {
    return RowPool::room_needed(new_slots, 2 * new_positions);
  }
  void grow_sequence_rows(int64_t count) {
    rows.grow_sequence_rows(count);
    const size_t size = static_cast<size_t>(rows.sequence_rows());
    prompt_lengths.resize(size, 0);
    last_tokens.resize(size, 0);
    reach.resize(size, 0);
  }

  RowPool rows;
  StepRunner runner;
  std::vector<int32_t> prompt_lengths, last_tokens, reach;  // per sequence row
};

DecoderOnlyModel::DecoderOnlyModel(const ModelFile& file, const ModelOptions& options)
    : PooledModel(options), config_(file.config()) {
  SEQTRANS_CHECK(config_.kind == ModelKind::DecoderOnly, "model file '{}' holds an encoder-decoder model, not a "
                 "decoder-only one", file.path());
  SEQTRANS_CHECK(config_.rope_theta.has_value(), "model file '{}': a decoder-only model needs rotary positions",
                 file.path());
  SEQTRANS_CHECK(options.device == Device::CUDA || options.dtype == DataType::F32,
                 "the CPU backend computes in fp32 only");
  const WeightLoader weights(file, options.device, options.dtype);
  const int64_t d = config_.d_model, vocab = config_.target_vocab_size;
  embedding_ = weights.get(config_.shared_embeddings ? "shared/embedding" : "decoder/embedding", {vocab, d});
  final_norm_ = weights.get("decoder/final_norm/gamma", {d});
  rotary_ = ops::rotary_table(config_.max_positions, head_width(config_, config_.decoder), *config_.rope_theta,
                              options.device);
  const Tensor output_weight = config_.tied_output ? embedding_ : weights.get("decoder/output/weight", {vocab, d});
  output_head_ = OutputHead(output_weight, Tensor(), options.tuning.topk_algorithm);
  for (int i = 0; i < config_.decoder.num_layers; ++i)
    layers_.emplace_back(weights, fmt::format("decoder/layer_{}", i), config_);
}

std::unique_ptr<DecoderState> DecoderOnlyModel::start() {
  return std::make_unique<DecoderOnlyState>(config_, options_, graphs_allowed(), &step_counts_);
}

void DecoderOnlyModel::reserve(DecoderState& base_state, const DecoderReservation& reservation) const {
  auto& state = static_cast<DecoderOnlyState&>(base_state);
  const int64_t rows = reservation.slots > 0 ? row_bucket(reservation.slots) : 0;
  const int64_t capacity = std::min<int64_t>(
      doubled_to(kInitialCacheCapacity, reservation.source_tokens / std::max<int64_t>(reservation.sentences, 1) +
                                            reservation.target_length, 0),
      config_.max_positions);
  state.rows.grow_history(rows, capacity);
  state.runner.resize(state.rows.rows());
  // The prompts' blocks, and the outputs' as the encoder-decoder model reserves them.
  state.rows.grow_blocks(reserved_blocks(reservation, rows) + reservation.source_tokens / kBlockPositions);
  state.grow_sequence_rows(reservation.sentences - state.rows.sequence_rows());
}

void DecoderOnlyModel::admit(DecoderState& base_state, const std::vector<std::vector<int32_t>>& prompts) {
  const BatchInvariantScope arithmetic = arithmetic_mode();
  auto& state = static_cast<DecoderOnlyState&>(base_state);
  if (prompts.empty()) return;
  const ProfileScope profile("prefill");
  size_t longest = 0;
  for (const auto& prompt : prompts) {
    SEQTRANS_CHECK(!prompt.empty(), "admit: every prompt needs at least one token (its BOS)");
    longest = std::max(longest, prompt.size());
  }
  SEQTRANS_CHECK(static_cast<int64_t>(longest) < config_.max_positions, "prompt of {} tokens leaves no room in the "
                 "model's {} positions", longest, config_.max_positions);
  state.grow_sequence_rows(static_cast<int64_t>(prompts.size()) - state.rows.free_sequence_rows());
  std::vector<int32_t> rows;
  for (const auto& prompt : prompts) {
    const int32_t row = state.rows.take_sequence_row();
    state.prompt_lengths[row] = static_cast<int32_t>(prompt.size());
    state.last_tokens[row] = prompt.back();
    state.reach[row] = static_cast<int32_t>(2 * prompt.size());
    rows.push_back(row);
  }
  // The new slots' history rows come after the current slots': the pending reorder moves first, so that
  // no current slot still reads one of them.
  const int64_t first_slot = state.rows.slots(), slots = first_slot + static_cast<int64_t>(prompts.size());
  try {
    state.rows.settle_reorder();
    state.rows.grow_history(row_bucket(slots), doubled_to(std::max(state.rows.capacity(), kInitialCacheCapacity),
                                                          static_cast<int64_t>(longest), config_.max_positions));
    state.runner.resize(state.rows.rows());
    prefill(state, prompts, rows, first_slot);
  } catch (const OutOfMemoryError&) {
    // The scheduler retries with fewer prompts: their rows and blocks go back.
    state.rows.give_back_sequence_rows(rows);
    throw;
  }
  for (size_t i = 0; i < prompts.size(); ++i)
    state.rows.join(rows[i], static_cast<int32_t>(prompts[i].size()) - 1);
}

void DecoderOnlyModel::prefill(DecoderOnlyState& state, const std::vector<std::vector<int32_t>>& prompts,
                               const std::vector<int32_t>& rows, int64_t first_slot) const {
  // Every prefilled token, one after another: its id, position, block and its sequence's history row.
  std::vector<int32_t> ids, positions, key_lengths, blocks, history_rows;
  for (size_t i = 0; i < prompts.size(); ++i) {
    const int32_t written = static_cast<int32_t>(prompts[i].size()) - 1;
    const int32_t history_row = static_cast<int32_t>(first_slot + static_cast<int64_t>(i));
    for (int32_t position = 0; position < written; ++position) {
      ids.push_back(prompts[i][static_cast<size_t>(position)]);
      positions.push_back(position);
      key_lengths.push_back(position + 1);
      blocks.push_back(state.rows.block_at(rows[i], 0, position));
      history_rows.push_back(history_row);
    }
    state.rows.note_history(history_row, written);
  }
  const Device device = options_.device;
  for (size_t first = 0; first < ids.size(); first += kPrefillPassTokens) {
    const size_t last = std::min(ids.size(), first + kPrefillPassTokens);
    const auto part = [&](const std::vector<int32_t>& values) {
      return ids_tensor(std::vector<int32_t>(values.begin() + static_cast<std::ptrdiff_t>(first),
                                             values.begin() + static_cast<std::ptrdiff_t>(last)),
                        device);
    };
    const Tensor pass_positions = part(positions), pass_lengths = part(key_lengths), pass_blocks = part(blocks);
    const Tensor pass_rows = part(history_rows);
    const CausalPass pass{pass_positions, pass_lengths, pass_blocks, state.rows.history(), &pass_rows, &rotary_};
    Tensor x = ops::gather_rows(embedding_, part(ids));
    for (size_t layer = 0; layer < layers_.size(); ++layer)
      x = layers_[layer].forward(x, state.rows.keys(layer), state.rows.values(layer), pass,
                                 /*keys_only=*/layer + 1 == layers_.size());
  }
}

DecoderOnlyState& DecoderOnlyModel::state_of(DecoderState& state) { return static_cast<DecoderOnlyState&>(state); }

StepRunner& DecoderOnlyModel::runner(DecoderState& state) const { return state_of(state).runner; }

RowPool& DecoderOnlyModel::row_pool(DecoderState& state) const { return static_cast<DecoderOnlyState&>(state).rows; }

int64_t DecoderOnlyModel::layout(DecoderState& state) const { return static_cast<DecoderOnlyState&>(state).rows.moves(); }

void DecoderOnlyModel::fill_step_inputs(DecoderState& base_state, const std::vector<int32_t>& input_ids,
                                        int32_t* inputs) const {
  auto& state = static_cast<DecoderOnlyState&>(base_state);
  RowPool& pool = state.rows;
  const int64_t rows = pool.rows();
  std::fill(inputs, inputs + kStepInputs * rows, 0);
  const auto row = [&](StepInput which) { return inputs + which * rows; };
  pool.write_step_inputs(input_ids, config_.bos_id,
                         {row(kIds), row(kPositions), row(kKeyLengths), row(kReorder), row(kCacheRows)});
  // A sequence's first step feeds its prompt's last token, in place of the searches' start id.
  for (int64_t s = 0; s < pool.slots(); ++s) {
    const int32_t sequence = pool.sequences[s];
    if (pool.positions[s] == state.prompt_lengths[sequence] - 1) row(kIds)[s] = state.last_tokens[sequence];
  }
}

Tensor DecoderOnlyModel::decode(DecoderOnlyState& state, int64_t rows) const {
  const auto input = [&](StepInput which) { return state.runner.input(which, rows); };
  const Tensor ids = input(kIds), positions = input(kPositions), key_lengths = input(kKeyLengths);
  const Tensor reorder = input(kReorder), cache_rows = input(kCacheRows);
  // The layers read a reordered copy of the history (beam reorders since the last step), which then goes back.
  Tensor& history = state.rows.history();
  Tensor reordered({rows, state.rows.capacity()}, DataType::I32, options_.device);
  ops::copy_row_prefixes(history, &reorder, positions, reordered);
  const CausalPass pass{positions, key_lengths, cache_rows, reordered, nullptr, &rotary_};
  Tensor x = ops::gather_rows(embedding_, ids);
  for (size_t layer = 0; layer < layers_.size(); ++layer)
    x = layers_[layer].forward(x, state.rows.keys(layer), state.rows.values(layer), pass);
  Tensor kept = history.slice_rows(0, rows);
  ops::copy_row_prefixes(reordered, nullptr, key_lengths, kept);
  return ops::rms_norm(x, {final_norm_, config_.layer_norm_epsilon});
}

void DecoderOnlyModel::decode_and_select(DecoderState& base_state, int64_t rows, int k,
                                         const RepetitionRequest* repetitions, Tensor& values, Tensor& ids) const {
  auto& state = static_cast<DecoderOnlyState&>(base_state);
  const Tensor x = decode(state, rows);
  output_head_.select(x, OutputSelection{k, &state.runner.suppressed(), repetitions, &state.runner.sampling_rows()},
                      values, ids);
}

void DecoderOnlyModel::select(DecoderState& base_state, const std::vector<int32_t>& sources) {
  static_cast<DecoderOnlyState&>(base_state).rows.select(sources);
}

}  // namespace seqtrans
