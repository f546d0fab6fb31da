#include "models/decoder_only_model.h"

#include <algorithm>
#include <deque>
#include <numeric>

#include "core/profiler.h"
#include "models/row_pool.h"

namespace seqtrans {

namespace {

// Rows of the step inputs (the ids first: StepRunner).
enum StepInput { kIds, kPositions, kKeyLengths, kReorder, kCacheRows, kStepInputs };

// Prompt tokens per prefill pass at most, whatever the chunk: a longer prompt is written in several passes,
// each reading the keys the earlier ones wrote, so that the temporaries stay bounded as the encoder's
// passes are.
constexpr int64_t kPrefillPassTokens = 8192;

// Prompts waiting for their prefill are a burst beside the rows decoding when they are at least this many and
// at least 1 / kBurstShare as many as those rows: 64 prompts of 512 tokens arriving at once (TinyLlama shape,
// H200) finished their 128 tokens in 458 ms with 1,024-token chunks after the first pass, 393 ms with every
// pass at 8,192 tokens. A few prompts, or a lone long one, beside rows decoding still go in chunks.
constexpr size_t kBurstPrompts = 16;
constexpr size_t kBurstShare = 4;

int64_t blocks_for(int64_t positions) { return (positions + kBlockPositions - 1) / kBlockPositions; }

// A prompt admitted whose slot has not joined yet: its keys and values are written `written` tokens so far.
struct PendingPrefill {
  int32_t row = 0;  // its sequence row
  std::vector<int32_t> prompt;
  int32_t written = 0;

  // Every token but the last is prefilled; the first step feeds the last.
  int32_t length() const { return static_cast<int32_t>(prompt.size()) - 1; }
  bool complete() const { return written == length(); }
};

}  // namespace

// Decoder state of a run: the rows and their blocks (a prompt is a sequence of the pool), the step runner,
// the prompts being prefilled, and per sequence row its prompt's length and last token (fed at its first
// step).
class DecoderOnlyState : public DecoderState {
 public:
  DecoderOnlyState(const ModelConfig& config, const ModelOptions& options, bool graphs, StepCounts* counts)
      : rows(static_cast<size_t>(config.decoder.num_layers),
             int64_t{key_value_heads(config.decoder)} * head_width(config, config.decoder), options.dtype,
             options.device),
        runner(options.device, kStepInputs, config.target_vocab_size, graphs, counts) {}

  int64_t slots() const override { return rows.slots(); }
  // A sequence is expected to reach its prompt's length plus as many tokens again, one still being
  // prefilled too (it holds no slot yet).
  int64_t room_left() const override {
    int64_t left = rows.room_left(reach);
    for (const PendingPrefill& pending : prefilling) left -= blocks_for(reach[static_cast<size_t>(pending.row)] + 1);
    return left;
  }
  int64_t room_needed(int64_t new_slots, int64_t new_positions) const override {
    return RowPool::room_needed(new_slots, 2 * new_positions);
  }
  size_t admitting() const override { return prefilling.size(); }
  void grow_sequence_rows(int64_t count) {
    rows.grow_sequence_rows(count);
    const size_t size = static_cast<size_t>(rows.sequence_rows());
    prompt_lengths.resize(size, 0);
    last_tokens.resize(size, 0);
    reach.resize(size, 0);
  }

  RowPool rows;
  StepRunner runner;
  std::deque<PendingPrefill> prefilling;  // in the order admitted, which is the order they join
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
  const WeightFormats formats = weight_formats(options);
  const WeightLoader weights(file, options.device, options.dtype, formats.dense);
  const int64_t d = config_.d_model, vocab = config_.target_vocab_size;
  embedding_ = weights.get(config_.shared_embeddings ? "shared/embedding" : "decoder/embedding", {vocab, d});
  final_norm_ = weights.get("decoder/final_norm/gamma", {d});
  rotary_ = ops::rotary_table(config_.max_positions, head_width(config_, config_.decoder), *config_.rope_theta,
                              options.device);
  const ops::TopkAlgorithm topk = options.tuning.topk_algorithm;
  output_head_ = config_.tied_output ? OutputHead(embedding_, Tensor(), topk, formats.output)
                                     : OutputHead(untied_output_weight(file, options, {vocab, d}), Tensor(), topk);
  // A tied embedding reads the head's weight, which may be a view of its padded copy: one copy in memory.
  if (config_.tied_output) embedding_ = output_head_.weight();
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
  const EngineModeScope mode = engine_mode();
  auto& state = static_cast<DecoderOnlyState&>(base_state);
  if (prompts.empty()) return;
  for (const auto& prompt : prompts) {
    SEQTRANS_CHECK(!prompt.empty(), "admit: every prompt needs at least one token (its BOS)");
    SEQTRANS_CHECK(static_cast<int64_t>(prompt.size()) < config_.max_positions, "prompt of {} tokens leaves no "
                   "room in the model's {} positions", prompt.size(), config_.max_positions);
  }
  state.grow_sequence_rows(static_cast<int64_t>(prompts.size()) - state.rows.free_sequence_rows());
  for (const auto& prompt : prompts) {
    const int32_t row = state.rows.take_sequence_row();
    state.prompt_lengths[row] = static_cast<int32_t>(prompt.size());
    state.last_tokens[row] = prompt.back();
    state.reach[row] = static_cast<int32_t>(2 * prompt.size());
    state.prefilling.push_back(PendingPrefill{row, prompt, 0});
  }
  if (options_.tuning.prefill_chunk_tokens > 0) return;  // continue_admission writes them, chunk by chunk
  // Unchunked: every prompt whole, now.
  const ProfileScope profile("prefill");
  try {
    while (!state.prefilling.back().complete()) prefill_pass(state, kPrefillPassTokens);
    join_prefilled(state);
  } catch (const OutOfMemoryError&) {
    // The scheduler retries with fewer prompts: their rows and blocks go back.
    withdraw_admitting(state, state.prefilling.size());
    throw;
  }
}

namespace {

// A pass need not keep to the chunk: no row is decoding, or the prompts waiting for their prefill are a burst
// beside the rows decoding (kBurstPrompts).
bool nobody_waits_on_the_chunk(const DecoderOnlyState& state) {
  const size_t waiting = state.prefilling.size(), decoding = static_cast<size_t>(state.rows.slots());
  return decoding == 0 || (waiting >= kBurstPrompts && waiting * kBurstShare >= decoding);
}

}  // namespace

void DecoderOnlyModel::continue_admission(DecoderState& base_state) {
  const EngineModeScope mode = engine_mode();
  auto& state = static_cast<DecoderOnlyState&>(base_state);
  if (state.prefilling.empty()) return;
  const ProfileScope profile("prefill");
  const int64_t chunk = std::min(options_.tuning.prefill_chunk_tokens, kPrefillPassTokens);
  // The chunk bounds how long the rows decoding wait for a pass. With none decoding nobody waits, and with a
  // burst of prompts waiting most of the batch waits on the prefill anyway: then the pass takes what it can
  // (fewer and larger passes), and falls back to the chunk where memory does not hold that much (a failed pass
  // leaves the progress as it was).
  bool written = false;
  if (chunk < kPrefillPassTokens && nobody_waits_on_the_chunk(state)) {
    try {
      prefill_pass(state, kPrefillPassTokens);
      written = true;
    } catch (const OutOfMemoryError&) {
    }
  }
  if (!written) prefill_pass(state, chunk);
  join_prefilled(state);
}

void DecoderOnlyModel::withdraw_admitting(DecoderState& base_state, size_t count) {
  auto& state = static_cast<DecoderOnlyState&>(base_state);
  SEQTRANS_CHECK(count <= state.prefilling.size(), "withdraw_admitting: {} of {} prompts being prefilled", count,
                 state.prefilling.size());
  std::vector<int32_t> rows;
  for (size_t i = state.prefilling.size() - count; i < state.prefilling.size(); ++i)
    rows.push_back(state.prefilling[i].row);
  state.rows.give_back_sequence_rows(rows);
  state.prefilling.resize(state.prefilling.size() - count);
}

void DecoderOnlyModel::prefill_pass(DecoderOnlyState& state, int64_t tokens) const {
  // Every token of the pass, one after another: its id, position, block and its prompt's row of the pass's
  // history table. The table is the pass's own, filled on the host from the lanes: a prompt's slot (and its
  // row of the pool's history) joins only once its prefill is complete, between two steps.
  std::vector<int32_t> ids, positions, key_lengths, blocks, table_rows, ends, takes;
  int64_t left = tokens;
  for (PendingPrefill& pending : state.prefilling) {
    const int32_t remaining = pending.length() - pending.written;
    const int32_t take = static_cast<int32_t>(std::min<int64_t>(remaining, left));
    if (take == 0 && remaining > 0) break;
    const int32_t table_row = static_cast<int32_t>(ends.size());
    for (int32_t position = pending.written; position < pending.written + take; ++position) {
      ids.push_back(pending.prompt[static_cast<size_t>(position)]);
      positions.push_back(position);
      key_lengths.push_back(position + 1);
      blocks.push_back(state.rows.block_at(pending.row, 0, position));
      table_rows.push_back(table_row);
    }
    ends.push_back(pending.written + take);
    takes.push_back(take);
    left -= take;
    if (take < remaining) break;
  }
  if (!ids.empty()) {
    const int64_t width = *std::max_element(ends.begin(), ends.end());
    std::vector<int32_t> table(ends.size() * static_cast<size_t>(width), 0);
    for (size_t i = 0; i < ends.size(); ++i)
      state.rows.lane_history(state.prefilling[i].row, 0, ends[i], table.data() + i * static_cast<size_t>(width));
    const Device device = options_.device;
    const Tensor host_table = Tensor::from_ints({static_cast<int64_t>(ends.size()), width}, table);
    Tensor history = device == Device::CPU ? host_table : host_table.to(device);
    const Tensor pass_positions = ids_tensor(positions, device), pass_lengths = ids_tensor(key_lengths, device);
    const Tensor pass_blocks = ids_tensor(blocks, device), pass_rows = ids_tensor(table_rows, device);
    const Tensor tiles = ops::attention_query_tiles(takes, device);
    const CausalPass pass{pass_positions, pass_lengths, pass_blocks, history, &pass_rows, &rotary_, &tiles, {}};
    ops::ResidualNorm x{ops::gather_rows(embedding_, ids_tensor(ids, device)), Tensor()};
    for (size_t layer = 0; layer < layers_.size(); ++layer) {
      const bool last = layer + 1 == layers_.size();
      const ops::RmsNormWeights next = norm_after(layer);
      x = layers_[layer].forward(x, state.rows.keys(layer), state.rows.values(layer), pass, last ? nullptr : &next,
                                 /*keys_only=*/last);
    }
  }
  for (size_t i = 0; i < ends.size(); ++i) state.prefilling[i].written = ends[i];
}

void DecoderOnlyModel::join_prefilled(DecoderOnlyState& state) const {
  size_t joining = 0;
  int32_t longest = 0, widest = 0;
  for (const PendingPrefill& pending : state.prefilling) {
    if (!pending.complete()) break;
    longest = std::max(longest, static_cast<int32_t>(pending.prompt.size()));
    widest = std::max(widest, pending.length());
    ++joining;
  }
  if (joining == 0) return;
  // The new slots' history rows come after the current slots': the pending reorder moves first, so that
  // no current slot still reads one of them.
  const int64_t first_slot = state.rows.slots(), slots = first_slot + static_cast<int64_t>(joining);
  state.rows.settle_reorder();
  state.rows.grow_history(row_bucket(slots), doubled_to(std::max(state.rows.capacity(), kInitialCacheCapacity),
                                                        longest, config_.max_positions));
  state.runner.resize(state.rows.rows());
  std::vector<int32_t> table(joining * static_cast<size_t>(widest), 0), history_rows;
  for (size_t i = 0; i < joining; ++i) {
    const PendingPrefill& pending = state.prefilling[i];
    state.rows.lane_history(pending.row, 0, pending.length(), table.data() + i * static_cast<size_t>(widest));
    history_rows.push_back(static_cast<int32_t>(first_slot + static_cast<int64_t>(i)));
  }
  if (widest > 0) {
    const Tensor host_table = Tensor::from_ints({static_cast<int64_t>(joining), widest}, table);
    const Device device = options_.device;
    ops::scatter_prefix(device == Device::CPU ? host_table : host_table.to(device), ids_tensor(history_rows, device),
                        state.rows.history());
  }
  for (size_t i = 0; i < joining; ++i) {
    const PendingPrefill& pending = state.prefilling.front();
    state.rows.note_history(history_rows[i], pending.length());
    state.rows.join(pending.row, pending.length());
    state.prefilling.pop_front();
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
  const CausalPass pass{positions, key_lengths, cache_rows, reordered, nullptr, &rotary_, nullptr, {}};
  ops::ResidualNorm x{ops::gather_rows(embedding_, ids), Tensor()};
  for (size_t layer = 0; layer < layers_.size(); ++layer) {
    const ops::RmsNormWeights next = norm_after(layer);
    x = layers_[layer].forward(x, state.rows.keys(layer), state.rows.values(layer), pass, &next);
  }
  Tensor kept = history.slice_rows(0, rows);
  ops::copy_row_prefixes(reordered, nullptr, key_lengths, kept);
  return x.normalized.defined() ? x.normalized : ops::rms_norm(x.sum, final_norm());
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
