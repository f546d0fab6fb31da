#include "models/encoder_decoder_model.h"

#include <algorithm>
#include <numeric>
#include <optional>

#include "core/profiler.h"
#include "models/memory_pool.h"
#include "models/row_pool.h"

namespace seqtrans {

static_assert(kPersistentDecodeRowsF16 <= ops::kPersistentDecoderMaxRows && kPersistentDecodeRowsF32 <= ops::kPersistentDecoderMaxRows);

int64_t default_persistent_decode_rows(DataType dtype) {
  return dtype == DataType::F16 ? kPersistentDecodeRowsF16 : kPersistentDecodeRowsF32;
}

namespace {

// Rows of the step inputs: what one host-to-device copy per step carries (the ids first: StepRunner).
enum StepInput {
  kIds,
  kPositions,
  kKeyLengths,
  kMemoryStarts,
  kSourceLengths,
  kReorder,
  kCacheRows,
  kStepInputs
};

// Source tokens per encoder pass: a wave with more is encoded in several. The encoder's temporaries take 4 d
// to 7 d values per token, next to the pools; past a few thousand tokens a larger pass is no faster (its
// GEMMs already fill the GPU) and only raises the peak.
constexpr size_t kEncoderPassTokens = 8192;

void require_supported(const ModelFile& file, const ModelConfig& config) {
  SEQTRANS_CHECK(config.kind == ModelKind::EncoderDecoder, "model file '{}' holds a decoder-only model, not an "
                 "encoder-decoder translation model", file.path());
}

}  // namespace

// Decoder state of a run: the decoder rows and their self-attention blocks (RowPool: a sentence is a
// sequence of the pool), the encoder memory (MemoryPool: a sentence's source is a run, in the same
// sequence row), and the step runner. Sentences join (admit) and leave (select) between steps.
class EncoderDecoderState : public DecoderState {
 public:
  EncoderDecoderState(const ModelConfig& config, const ModelOptions& options, bool graphs, StepCounts* counts)
      : rows(static_cast<size_t>(config.decoder.num_layers), config.d_model, options.dtype, options.device),
        memory(static_cast<size_t>(config.decoder.num_layers), config.d_model, config.max_positions, options.dtype,
               options.device, &counts->memory_compactions),
        runner(options.device, kStepInputs, config.target_vocab_size, graphs, counts),
        layers_(static_cast<size_t>(config.decoder.num_layers)) {}

  int64_t slots() const override { return rows.slots(); }
  int64_t room_left() const override { return rows.room_left(memory.lengths); }
  int64_t room_needed(int64_t new_slots, int64_t new_positions) const override {
    return RowPool::room_needed(new_slots, new_positions);
  }
  int64_t layout() const { return rows.moves() + memory.moves(); }
  // `count` more sentence rows in both pools.
  void grow_sentence_rows(int64_t count) {
    rows.grow_sequence_rows(count);
    memory.resize_rows(rows.sequence_rows());
  }
  // The sentence rows in flight (with a slot).
  std::vector<int32_t> live_sentences() const {
    std::vector<char> in_flight(static_cast<size_t>(rows.sequence_rows()), 0);
    for (const int32_t row : rows.sequences) in_flight[static_cast<size_t>(row)] = 1;
    std::vector<int32_t> live;
    for (int32_t row = 0; row < rows.sequence_rows(); ++row)
      if (in_flight[static_cast<size_t>(row)]) live.push_back(row);
    return live;
  }
  // Each layer's caches as the decoder layers read them: views of the pools' buffers, made again when they
  // move (the persistent kernel's description points at these).
  std::vector<DecoderLayerCache>& layer_caches() {
    if (layers_layout_ != layout()) {
      for (size_t i = 0; i < layers_.size(); ++i)
        layers_[i] = DecoderLayerCache{rows.keys(i), rows.values(i), memory.keys(i), memory.values(i)};
      layers_layout_ = layout();
    }
    return layers_;
  }

  RowPool rows;
  MemoryPool memory;
  StepRunner runner;

 private:
  std::vector<DecoderLayerCache> layers_;
  int64_t layers_layout_ = -1;
};

EncoderDecoderModel::EncoderDecoderModel(const ModelFile& file, const ModelOptions& options)
    : PooledModel(options), config_(file.config()) {
  require_supported(file, config_);
  SEQTRANS_CHECK(options.device == Device::CUDA || options.dtype == DataType::F32,
                 "the CPU backend computes in fp32 only");
  const WeightFormats formats = weight_formats(options);
  const WeightLoader weights(file, options.device, options.dtype, formats.dense);
  const int64_t d = config_.d_model;
  if (config_.shared_embeddings) {
    source_embedding_ = weights.get("shared/embedding", {config_.source_vocab_size, d});
    target_embedding_ = source_embedding_;
  } else {
    source_embedding_ = weights.get("encoder/embedding", {config_.source_vocab_size, d});
    target_embedding_ = weights.get("decoder/embedding", {config_.target_vocab_size, d});
  }
  const int64_t position_rows = int64_t{config_.max_positions} + config_.position_offset;
  if (config_.position_encoding == PositionEncoding::Learned) {
    source_positions_ = weights.get("encoder/position_embedding", {position_rows, d});
    target_positions_ = weights.get("decoder/position_embedding", {position_rows, d});
  } else if (config_.position_encoding == PositionEncoding::SinusoidalFairseq) {
    source_positions_ = ops::sinusoid_table(position_rows, d, options_.device, PositionEncoding::SinusoidalFairseq);
    if (options_.dtype != DataType::F32) source_positions_ = ops::convert(source_positions_, options_.dtype);
    target_positions_ = source_positions_;
  } else {
    // Evaluated once instead of per element and step (a double-precision pow and sine each).
    sinusoids_ = ops::sinusoid_table(config_.max_positions, d, options_.device);
  }
  source_norms_ = StackNorms(weights, "encoder", config_, config_.encoder);
  target_norms_ = StackNorms(weights, "decoder", config_, config_.decoder);
  // The output bias is kept in fp32: it is added to fp32 logits.
  Tensor output_bias;
  if (config_.output_bias)
    output_bias = WeightLoader(file, options.device, DataType::F32).get("decoder/output/bias", {config_.target_vocab_size});
  const ops::TopkAlgorithm topk = options_.tuning.topk_algorithm;
  output_head_ = config_.tied_output ? OutputHead(target_embedding_, output_bias, topk, formats.output)
                                     : OutputHead(untied_output_weight(file, options, {config_.target_vocab_size, d}),
                                                  output_bias, topk);
  // A tied embedding reads the head's weight, which may be a view of its padded copy: one copy in memory.
  if (config_.tied_output) {
    target_embedding_ = output_head_.weight();
    if (config_.shared_embeddings) source_embedding_ = target_embedding_;
  }
  for (int i = 0; i < config_.encoder.num_layers; ++i)
    encoder_layers_.emplace_back(weights, fmt::format("encoder/layer_{}", i), config_);
  for (int i = 0; i < config_.decoder.num_layers; ++i)
    decoder_layers_.emplace_back(weights, fmt::format("decoder/layer_{}", i), config_);
}

Tensor EncoderDecoderModel::embed(const Tensor& ids, const Tensor& positions, Side side) const {
  const bool source = side == Side::Source;
  ops::EmbeddingOptions options;
  options.scale = config_.embedding_scale;
  options.position_offset = config_.position_offset;
  if (source_positions_.defined()) {  // a table: learned, or fairseq sinusoids
    options.positions = PositionEncoding::Learned;
    options.position_table = source ? &source_positions_ : &target_positions_;
  } else {
    options.positions = PositionEncoding::SinusoidalSplit;
    options.sinusoid_table = &sinusoids_;
  }
  const Tensor embedded = ops::embed(ids, positions, source ? source_embedding_ : target_embedding_, options);
  return (source ? source_norms_ : target_norms_).after_embedding(embedded);
}

Tensor EncoderDecoderModel::encode_tensor(const std::vector<std::vector<int32_t>>& sources, Tensor& lengths) const {
  const int64_t batch = static_cast<int64_t>(sources.size());
  SEQTRANS_CHECK(batch > 0, "encode: empty batch");
  size_t longest = 0;
  for (const auto& source : sources) longest = std::max(longest, source.size());
  SEQTRANS_CHECK(longest >= 1, "encode: every source needs at least one token (its EOS)");
  SEQTRANS_CHECK(static_cast<int64_t>(longest) <= config_.max_positions,
                 "source of {} tokens exceeds the model's {} positions", longest, config_.max_positions);
  const int64_t time = static_cast<int64_t>(longest);

  // [b, t] ids padded with pad_id; padded keys are masked through `lengths`.
  std::vector<int32_t> ids(static_cast<size_t>(batch * time), config_.pad_id);
  std::vector<int32_t> positions(ids.size());
  std::vector<int32_t> source_lengths(static_cast<size_t>(batch));
  for (int64_t b = 0; b < batch; ++b) {
    std::copy(sources[b].begin(), sources[b].end(), ids.begin() + b * time);
    for (int64_t t = 0; t < time; ++t) positions[b * time + t] = static_cast<int32_t>(t);
    source_lengths[b] = static_cast<int32_t>(sources[b].size());
  }
  lengths = ids_tensor(source_lengths, options_.device);
  ops::ResidualNorm x{embed(ids_tensor(ids, options_.device), ids_tensor(positions, options_.device), Side::Source),
                      Tensor()};
  for (size_t i = 0; i < encoder_layers_.size(); ++i)
    x = encoder_layers_[i].forward(x, batch, lengths, source_norms_.norm_after(encoder_layers_, i));
  return source_norms_.after_layers(x).reshape({batch, time, config_.d_model});
}

Tensor EncoderDecoderModel::encode_packed(const std::vector<std::vector<int32_t>>& sources) const {
  const int64_t batch = static_cast<int64_t>(sources.size());
  SEQTRANS_CHECK(batch > 0, "encode: empty batch");
  size_t longest = 0, tokens = 0;
  for (const auto& source : sources) {
    SEQTRANS_CHECK(!source.empty(), "encode: every source needs at least one token (its EOS)");
    longest = std::max(longest, source.size());
    tokens += source.size();
  }
  SEQTRANS_CHECK(static_cast<int64_t>(longest) <= config_.max_positions,
                 "source of {} tokens exceeds the model's {} positions", longest, config_.max_positions);
  const int64_t time = static_cast<int64_t>(longest);

  // The tokens one after another ([n]); token q of a sentence starting at `start` attends to the `length`
  // tokens from `start` on (a key span: nothing per key goes to the device).
  std::vector<int32_t> ids, positions, key_starts, key_lengths, sentence_lengths;
  ids.reserve(tokens);
  positions.reserve(tokens);
  key_starts.reserve(tokens);
  key_lengths.reserve(tokens);
  int32_t start = 0;
  for (const auto& source : sources) {
    const int32_t length = static_cast<int32_t>(source.size());
    sentence_lengths.push_back(length);
    for (int32_t t = 0; t < length; ++t) {
      ids.push_back(source[t]);
      positions.push_back(t);
      key_starts.push_back(start);
      key_lengths.push_back(length);
    }
    start += length;
  }
  const Tensor starts = ids_tensor(key_starts, options_.device);
  const Tensor lengths = ids_tensor(key_lengths, options_.device);
  const Tensor tiles = ops::attention_query_tiles(sentence_lengths, options_.device);
  const PackedTokens packed{starts, lengths, tiles, time};
  ops::ResidualNorm x{embed(ids_tensor(ids, options_.device), ids_tensor(positions, options_.device), Side::Source),
                      Tensor()};  // [n, d]
  for (size_t i = 0; i < encoder_layers_.size(); ++i)
    x = encoder_layers_[i].forward_packed(x, packed, source_norms_.norm_after(encoder_layers_, i));
  return source_norms_.after_layers(x);
}

Tensor EncoderDecoderModel::encode_joining(const std::vector<std::vector<int32_t>>& sources) const {
  if (options_.tuning.packed_encoder) return encode_packed(sources);
  Tensor lengths;
  const Tensor padded = encode_tensor(sources, lengths);  // [b, t, d]
  const int64_t time = padded.dim(1);
  std::vector<int32_t> real;  // the rows of real tokens in [b * t, d]
  for (size_t b = 0; b < sources.size(); ++b)
    for (size_t t = 0; t < sources[b].size(); ++t) real.push_back(static_cast<int32_t>(b * time + t));
  return ops::gather_rows(padded.reshape({padded.dim(0) * time, config_.d_model}), ids_tensor(real, options_.device));
}

std::unique_ptr<DecoderState> EncoderDecoderModel::start() {
  return std::make_unique<EncoderDecoderState>(config_, options_, graphs_allowed(), &step_counts_);
}

void EncoderDecoderModel::reserve(DecoderState& base_state, const DecoderReservation& reservation) const {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  const int64_t positions = config_.max_positions;
  // A graph pads its slots up to a bucket, so the pool holds the bucket of the most slots.
  const int64_t rows = reservation.slots > 0 ? row_bucket(reservation.slots) : 0;
  // The start token takes position 0: an output of n tokens feeds n positions.
  const int64_t capacity = std::min<int64_t>(doubled_to(kInitialCacheCapacity, reservation.target_length, 0), positions);
  state.rows.grow_history(rows, capacity);
  state.runner.resize(state.rows.rows());
  state.rows.grow_blocks(reserved_blocks(reservation, rows));
  state.grow_sentence_rows(reservation.sentences - state.rows.sequence_rows());
  // Without a bound on the tokens, 32 positions a sentence (the pool grows when they need more).
  state.memory.grow(reservation.source_tokens > 0 ? reservation.source_tokens
                                                  : reservation.sentences * kInitialCacheCapacity,
                    state.live_sentences());
}

void EncoderDecoderModel::admit(DecoderState& base_state, const std::vector<std::vector<int32_t>>& sources) {
  const EngineModeScope mode = engine_mode();
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  if (sources.empty()) return;
  const ProfileScope profile("encoder");
  // A sentence row each, and a run of the memory pool for its tokens.
  state.grow_sentence_rows(static_cast<int64_t>(sources.size()) - state.rows.free_sequence_rows());
  std::vector<int32_t> lengths;
  for (const auto& source : sources) lengths.push_back(static_cast<int32_t>(source.size()));
  const std::vector<int32_t> starts = state.memory.place(lengths, state.live_sentences());
  std::vector<int32_t> rows, pool_positions;
  for (size_t i = 0; i < sources.size(); ++i) {
    const int32_t row = state.rows.take_sequence_row();
    state.memory.lengths[row] = lengths[i];
    state.memory.starts[row] = starts[i];
    rows.push_back(row);
    for (int32_t t = 0; t < lengths[i]; ++t) pool_positions.push_back(starts[i] + t);
  }
  try {
    encode_into_memory(state, sources, pool_positions);
  } catch (const OutOfMemoryError&) {
    // The scheduler retries with fewer sentences: the rows and runs go back, and nothing else has changed.
    state.memory.give_back_runs(starts, lengths);
    state.rows.give_back_sequence_rows(rows);
    throw;
  }
  // One new slot per sentence, at position 0, continuing nothing, in its sentence's first lane.
  for (const int32_t row : rows) state.rows.join(row);
}

void EncoderDecoderModel::encode_into_memory(EncoderDecoderState& state, const std::vector<std::vector<int32_t>>& sources,
                                             const std::vector<int32_t>& pool_positions) const {
  size_t first = 0, first_token = 0;
  while (first < sources.size()) {
    // Whole sentences up to kEncoderPassTokens (a longer one alone).
    size_t end = first, tokens = 0;
    while (end < sources.size() && (end == first || tokens + sources[end].size() <= kEncoderPassTokens))
      tokens += sources[end++].size();
    const std::vector<std::vector<int32_t>> pass(sources.begin() + static_cast<std::ptrdiff_t>(first),
                                                 sources.begin() + static_cast<std::ptrdiff_t>(end));
    const Tensor memory = encode_joining(pass);  // [tokens, d]
    const auto pass_positions = pool_positions.begin() + static_cast<std::ptrdiff_t>(first_token);
    const Tensor positions =
        ids_tensor(std::vector<int32_t>(pass_positions, pass_positions + static_cast<std::ptrdiff_t>(tokens)),
                   options_.device);
    for (size_t i = 0; i < decoder_layers_.size(); ++i)
      decoder_layers_[i].project_memory_into(memory, positions, state.layer_caches()[i]);
    first = end;
    first_token += tokens;
  }
}

EncoderDecoderState& EncoderDecoderModel::state_of(DecoderState& state) {
  return static_cast<EncoderDecoderState&>(state);
}

StepRunner& EncoderDecoderModel::runner(DecoderState& state) const { return state_of(state).runner; }

RowPool& EncoderDecoderModel::row_pool(DecoderState& state) const { return static_cast<EncoderDecoderState&>(state).rows; }

int64_t EncoderDecoderModel::layout(DecoderState& state) const {
  return static_cast<EncoderDecoderState&>(state).layout();
}

void EncoderDecoderModel::fill_step_inputs(DecoderState& base_state, const std::vector<int32_t>& input_ids,
                                           int32_t* inputs) const {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  RowPool& pool = state.rows;
  const int64_t rows = pool.rows();
  // Padding rows also read no memory (length 0).
  std::fill(inputs, inputs + kStepInputs * rows, 0);
  const auto row = [&](StepInput which) { return inputs + which * rows; };
  pool.write_step_inputs(input_ids, config_.decoder_start_id,
                         {row(kIds), row(kPositions), row(kKeyLengths), row(kReorder), row(kCacheRows)});
  for (int64_t s = 0; s < pool.slots(); ++s) {
    row(kMemoryStarts)[s] = state.memory.starts[pool.sequences[s]];
    row(kSourceLengths)[s] = state.memory.lengths[pool.sequences[s]];
  }
}

EncoderDecoderModel::DecodedStep EncoderDecoderModel::decode(EncoderDecoderState& state, int64_t rows,
                                                             const ops::PersistentGreedyOutput* greedy) const {
  const auto input = [&](StepInput which) { return state.runner.input(which, rows); };
  const Tensor ids = input(kIds), positions = input(kPositions), key_lengths = input(kKeyLengths);
  const Tensor memory_starts = input(kMemoryStarts), source_lengths = input(kSourceLengths);
  const Tensor cache_rows = input(kCacheRows);
  // Beam reorders since the last step move history rows only (each slot's positions so far, from the slot
  // it continues); keys and values stay in place. The step appends one position, which goes back with them.
  const Tensor reorder = input(kReorder);
  Tensor x = embed(ids, positions, Side::Target);  // [rows, d]
  // The persistent kernel reads the history through the reorder and rewrites its rows in place.
  Tensor& history = state.rows.history();
  const DecoderStepInputs in_place{positions,      key_lengths,          history, memory_starts,
                                   source_lengths, state.memory.span(), &cache_rows};
  bool selected = false;
  // A pre-norm step's kernel ends with the stack's final norm; a post-norm stack has none in this engine's
  // models, but where one would, it follows the kernel.
  if (persistent_layers(state, x, in_place, reorder, greedy, selected))
    return DecodedStep{config_.decoder.pre_norm ? x : target_norms_.after_layers(x), selected};
  // The layers read a reordered copy, which then goes back.
  Tensor reordered({rows, state.rows.capacity()}, DataType::I32, options_.device);
  ops::copy_row_prefixes(history, &reorder, positions, reordered);
  const DecoderStepInputs inputs{positions,      key_lengths,          reordered, memory_starts,
                                 source_lengths, state.memory.span(), &cache_rows};
  std::vector<DecoderLayerCache>& caches = state.layer_caches();
  ops::ResidualNorm stream{x, Tensor()};
  for (size_t i = 0; i < decoder_layers_.size(); ++i)
    stream = decoder_layers_[i].step(stream, caches[i], inputs, target_norms_.norm_after(decoder_layers_, i));
  Tensor kept = history.slice_rows(0, rows);
  ops::copy_row_prefixes(reordered, nullptr, key_lengths, kept);
  return DecodedStep{target_norms_.after_layers(stream), false};
}

bool EncoderDecoderModel::persistent_layers(EncoderDecoderState& state, Tensor& x, const DecoderStepInputs& inputs,
                                            const Tensor& reorder, const ops::PersistentGreedyOutput* greedy,
                                            bool& selected) const {
  const bool automatic = options_.tuning.persistent_decode_rows == kPersistentDecodeAuto;
  const int64_t persistent_rows =
      automatic ? default_persistent_decode_rows(options_.dtype) : options_.tuning.persistent_decode_rows;
  // The kernel folds the norms into its products' input and the residual sums into their epilogues, pre-norm
  // (with the stack's final norm) or post-norm. Its products sum in another order than the layer-by-layer
  // GEMMs: batch-invariant mode never takes it.
  const LayerNorm* final_norm = target_norms_.final_norm();
  const bool pre_norm = config_.decoder.pre_norm;
  const bool pre_norm_declines =
      pre_norm && (final_norm == nullptr || (automatic && x.dim(0) < kPersistentPreNormMinRows));
  if (x.dim(0) > persistent_rows || pre_norm_declines || options_.tuning.batch_invariant) return false;
  std::vector<ops::PersistentDecoderLayer> layers;
  std::vector<DecoderLayerCache>& caches = state.layer_caches();
  for (size_t i = 0; i < decoder_layers_.size(); ++i) layers.push_back(decoder_layers_[i].describe(caches[i]));
  const ops::PersistentDecoderStep step{&inputs.positions,      &inputs.key_lengths, &inputs.memory_starts,
                                        &inputs.source_lengths, inputs.cache_rows,   &inputs.history,
                                        inputs.source_span,     config_.decoder.num_heads,
                                        config_.layer_norm_epsilon, config_.activation, &reorder,
                                        pre_norm,                   pre_norm ? &final_norm->gamma() : nullptr,
                                        pre_norm ? &final_norm->beta() : nullptr};
  if (!ops::persistent_decoder_fits(x, layers, step)) return false;
  ++step_counts_.persistent;
  // The folded output layer reads the kernel's last norm: a final norm after a post-norm kernel would come
  // between them.
  selected = greedy != nullptr && options_.tuning.persistent_argmax && (pre_norm || !target_norms_.has_final()) &&
             greedy->weight->bytes() <= kPersistentOutputMaxBytes &&
             ops::persistent_output_fits(x, layers, step, *greedy);
  if (selected) ++step_counts_.persistent_argmax;
  x = ops::persistent_decoder_step(x, layers, step, selected ? greedy : nullptr);
  return true;
}

void EncoderDecoderModel::decode_and_select(DecoderState& base_state, int64_t rows, int k,
                                            const RepetitionRequest* repetitions, Tensor& values, Tensor& ids) const {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  const bool greedy = k == 1 && (repetitions == nullptr || !repetitions->on());
  std::optional<ops::PersistentGreedyOutput> fold;
  if (greedy) fold = output_head_.persistent_greedy(state.runner.suppressed(), values, ids);
  const DecodedStep decoded = decode(state, rows, fold ? &*fold : nullptr);
  if (!decoded.selected)
    output_head_.select(decoded.x,
                        OutputSelection{k, &state.runner.suppressed(), repetitions, &state.runner.sampling_rows()},
                        values, ids);
}

void EncoderDecoderModel::select(DecoderState& base_state, const std::vector<int32_t>& sources) {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  // Sentences left with no slot leave: their memory runs are free again (their rows and blocks already are).
  for (const int32_t row : state.rows.select(sources)) state.memory.give_back(row);
}

}  // namespace seqtrans
