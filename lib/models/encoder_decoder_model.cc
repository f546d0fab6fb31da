#include "models/encoder_decoder_model.h"

#include <algorithm>
#include <climits>
#include <cstring>
#include <limits>
#include <map>
#include <numeric>
#include <optional>
#include <set>
#include <tuple>

#include "core/profiler.h"
#include "models/position_runs.h"
#include "ops/graph.h"

namespace seqtrans {

static_assert(kPersistentDecodeRowsF16 <= ops::kPersistentDecoderMaxRows && kPersistentDecodeRowsF32 <= ops::kPersistentDecoderMaxRows);

int64_t default_persistent_decode_rows(DataType dtype) {
  return dtype == DataType::F16 ? kPersistentDecodeRowsF16 : kPersistentDecodeRowsF32;
}

// The output layer's values and ids side by side in one 32-bit buffer [2, rows, width] (width k, or 1 for a
// draw), so that a step brings both to the host in one synchronous copy instead of two (H100: no change
// measurable beyond the spread of runs, docs/BENCHMARKS.md; one driver call less a step).
struct StepOutputs {
  Tensor both;
  Tensor values;  // [rows, k] log-probs, or [rows] of a sampling step: a view of `both`
  Tensor ids;     // [rows, k], or [rows] drawn ids: a view of `both`
  int64_t width = 0;

  StepOutputs() = default;
  StepOutputs(int64_t rows, int k, Device device) : width(std::max(k, 1)) {
    both = Tensor({2, rows, width}, DataType::I32, device);
    const Shape shape = k == 0 ? Shape{rows} : Shape{rows, width};
    char* base = static_cast<char*>(both.raw());
    values = Tensor::borrow(base, shape, DataType::F32, device);
    ids = Tensor::borrow(base + both.bytes() / 2, shape, DataType::I32, device);
  }
};

// One decoder step recorded as a graph for a number of rows and candidates per row, and its outputs.
struct StepGraph {
  explicit StepGraph(Device device) : graph(device) {}
  ops::DeviceGraph graph;
  StepOutputs outputs;
};


// Decoder state of a run: one slot per active hypothesis, each at its own position. Sentences join
// (admit) and leave (select) between steps. Keys and values stay where they were written, in pools:
//  - the self-attention cache is a pool of blocks of kBlockPositions positions. A sentence owns lanes, one
//    per slot it has had at once (its beams); its k-th slot writes position p into block p / B of lane k,
//    and every slot reads its keys through the history table (slot, position) -> block, so beam reorders
//    move only indices. Positions below p in a lane may be read by other beams; p itself is fresh;
//  - the encoder memory is a pool of positions where each sentence holds its source as one run.
// Blocks, not whole rows of the longest output: a run's memory then follows the lengths it decodes (on
// newstest2014, whole rows held the pool at 256 rows x 256 positions once any output passed 128 tokens).
// Runs, not rows of the longest source, for the same reason: rows made each of 256 sentences hold at least
// 128 positions there, twice the token budget's 16,384 or more. A run is contiguous, so cross-attention reads it
// like a row, and a freed run leaves a hole that a compaction closes when no hole is long enough.
class EncoderDecoderState : public DecoderState {
 public:
  int64_t slots() const override { return static_cast<int64_t>(positions.size()); }
  int64_t room_left() const override;
  int64_t room_needed(int64_t new_slots, int64_t new_positions) const override;

  // Per slot, on the host.
  std::vector<int32_t> positions;  // tokens already fed
  std::vector<int32_t> sentences;  // its sentence's row (of the per-sentence vectors below)
  std::vector<int32_t> reorder;    // the slot of the last step it continues (itself after a step, or new)
  std::vector<int32_t> lanes;      // its lane among its sentence's
  std::vector<int32_t> blocks;     // the block it writes this step (set by prepare_step)

  // Per sentence row, on the host.
  std::vector<int32_t> source_lengths;                          // [sentence rows]
  std::vector<int32_t> memory_starts;                           // its run in the memory pool
  std::vector<std::vector<std::vector<int32_t>>> sentence_lanes;  // [sentence rows][lane] -> blocks
  std::vector<int32_t> free_sentences;                          // rows free for new sentences
  std::vector<int32_t> free_blocks;                             // cache blocks no sentence owns
  PositionRuns memory_runs;                                     // the memory pool's positions
  // What the device buffers hold written, so that growing them copies nothing else: positions per cache
  // block (its most), and per history row the key lengths of the last step (what it copied back).
  std::vector<int32_t> block_fill;
  std::vector<int32_t> history_lengths;
  // select()'s next per-slot vectors and per-sentence counts, kept so that a step allocates nothing.
  struct {
    std::vector<int32_t> positions, sentences, reorder, lanes;
    std::vector<int32_t> slots_of_sentence, first_position;
    std::vector<char> had_slot;
  } next;

  // On the device. Graphs recorded against these buffers stay valid until the buffers move.
  std::vector<DecoderLayerCache> layers;  // self caches [blocks, B, d], memory [positions, 1, d]
  Tensor history;                         // [rows, capacity] int32: the block of each slot's key t
  Tensor step_inputs;                     // [kStepInputs, rows] int32, uploaded once per step
  Tensor sampling_rows;                   // [rows, kSamplingRowWords] int32: sampling steps' draws
  int64_t rows = 0;                       // history rows: the most slots a step can hold
  int64_t capacity = 0;                   // positions a history row holds
  int64_t cache_blocks = 0;
  int64_t sentence_rows = 0;
  int64_t source_span = 0;  // a power of two from 32 at least every source length: graphs hold it
  SuppressedLists suppressed;  // the steps' suppressed-id lists; its current one is this step's
  // (rows, k or kSampled, suppressed list) -> recorded step; and the keys run op by op since the buffers last
  // changed.
  using GraphKey = std::tuple<int64_t, int, int>;
  std::map<GraphKey, std::unique_ptr<StepGraph>> graphs;
  std::set<GraphKey> launched;

  void drop_graphs() {
    graphs.clear();
    launched.clear();
  }
};

namespace {

// Positions per cache block: vLLM's default; a sentence wastes less than a block per beam.
constexpr int64_t kBlockPositions = 16;

}  // namespace

// Room in the block pool: every slot is expected to fill blocks up to its source's length (or its
// position, when past it), and to waste at most one block rounding up. Without this, iteration-level
// batching kept 256 sentences in flight whatever their lengths, and its pool grew past the shrinking
// batches' (newstest2014: 8,192 blocks against 4,096). Before the first step there is no pool to keep.
int64_t EncoderDecoderState::room_left() const {
  if (cache_blocks == 0) return std::numeric_limits<int64_t>::max();
  int64_t expected = 0;
  for (size_t s = 0; s < positions.size(); ++s) {
    const int64_t reach = std::max<int64_t>(positions[s], source_lengths[static_cast<size_t>(sentences[s])]) + 1;
    expected += (reach + kBlockPositions - 1) / kBlockPositions;
  }
  return cache_blocks - expected;
}

int64_t EncoderDecoderState::room_needed(int64_t new_slots, int64_t new_positions) const {
  return new_positions / kBlockPositions + new_slots;
}

namespace {

// Most sentences end within 32 tokens; longer ones double the capacity (and record their graphs again).
constexpr int64_t kInitialCacheCapacity = 32;
// Source tokens per encoder pass: a wave with more is encoded in several. The encoder's temporaries take 4 d
// to 7 d values per token, next to the pools; past a few thousand tokens a larger pass is no faster (its
// GEMMs already fill the GPU) and only raises the peak.
constexpr size_t kEncoderPassTokens = 8192;
// Positions the memory pool's compaction moves per copy (1 MiB at d = 256 in fp16).
constexpr int64_t kCompactionChunk = 2048;
// Rows of step_inputs: what one host-to-device copy per step carries.
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

Tensor ids_tensor(const std::vector<int32_t>& values, Device device) {
  Tensor host = Tensor::from_ints({static_cast<int64_t>(values.size())}, values);
  return device == Device::CPU ? host : host.to(device);
}

// Row counts a step graph is recorded for: 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers of two and 1.5x
// them). Slot counts that change by a few reuse a graph, padding at most a third of its rows.
int64_t row_bucket(int64_t slots) {
  int64_t power = 1;
  while (power < slots) {
    if (power * 3 / 2 >= slots && power >= 2) return power * 3 / 2;
    power *= 2;
  }
  return power;
}

// The smallest of start, 2 start, 4 start, ... that reaches `needed`, capped at `limit` (if positive).
int64_t doubled_to(int64_t start, int64_t needed, int64_t limit) {
  int64_t size = std::max<int64_t>(start, 1);
  while (size < needed) size *= 2;
  return limit > 0 ? std::min(size, std::max(limit, needed)) : size;
}

// Self-attention cache blocks for a run's bounds (the pool grows by half when sentences need more): every
// slot's whole output when the outputs' bound is known (one batch); else outputs as long as their sources,
// each slot holding its sentence's source in blocks, one of them partly empty (the same pools for both
// batching modes at one budget: newstest2014 at 256 sentences / 16,384 tokens, 5,120 blocks); else 32
// positions a slot.
int64_t reserved_blocks(const DecoderReservation& reservation, int64_t rows) {
  const auto blocks_for = [](int64_t positions) { return (positions + kBlockPositions - 1) / kBlockPositions; };
  if (reservation.target_length > 0) return rows * blocks_for(reservation.target_length);
  if (reservation.source_tokens > 0 && reservation.sentences > 0)
    return blocks_for(reservation.source_tokens * reservation.slots / reservation.sentences) + rows;
  return rows * blocks_for(kInitialCacheCapacity);
}

// A buffer of [rows, capacity, ...] holding `old`'s row i up to written[i] positions (the rest is never
// read: slots read only the positions they or their beam ancestors wrote, and padding rows read none).
Tensor regrow(const Tensor& old, const std::vector<int32_t>& written, int64_t rows, int64_t capacity,
              const Shape& trailing, DataType dtype, Device device) {
  Shape shape{rows, capacity};
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  Tensor grown(shape, dtype, device);
  if (old.defined() && !written.empty()) ops::copy_row_prefixes(old, nullptr, ids_tensor(written, device), grown);
  return grown;
}

// Takes an entry of a non-empty free list, the last freed (still warm in cache). Which one does not
// matter otherwise: pools keep their size and every read goes through a table; and a step takes a block
// per lane every 16 positions, so this stays O(1) rather than a scan of thousands of free blocks.
int32_t take_free(std::vector<int32_t>& free_list) {
  const int32_t entry = free_list.back();
  free_list.pop_back();
  return entry;
}

void require_supported(const ModelFile& file, const ModelConfig& config) {
  SEQTRANS_CHECK(config.kind == ModelKind::EncoderDecoder, "model file '{}' holds a decoder-only model, not an "
                 "encoder-decoder translation model", file.path());
}

}  // namespace

EncoderDecoderModel::EncoderDecoderModel(const ModelFile& file, const ModelOptions& options)
    : config_(file.config()), options_(options) {
  require_supported(file, config_);
  SEQTRANS_CHECK(options.device == Device::CUDA || options.dtype == DataType::F32,
                 "the CPU backend computes in fp32 only");
  const WeightLoader weights(file, options.device, options.dtype);
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
  const Tensor output_weight = config_.tied_output
                                   ? target_embedding_
                                   : weights.get("decoder/output/weight", {config_.target_vocab_size, d});
  // The output bias is kept in fp32: it is added to fp32 logits.
  Tensor output_bias;
  if (config_.output_bias)
    output_bias = WeightLoader(file, options.device, DataType::F32).get("decoder/output/bias", {config_.target_vocab_size});
  output_head_ = OutputHead(output_weight, output_bias, options_.topk_algorithm);
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
  Tensor x = embed(ids_tensor(ids, options_.device), ids_tensor(positions, options_.device), Side::Source);
  for (const EncoderLayer& layer : encoder_layers_) x = layer.forward(x, batch, lengths);
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
  std::vector<int32_t> ids, positions, key_starts, key_lengths;
  ids.reserve(tokens);
  positions.reserve(tokens);
  key_starts.reserve(tokens);
  key_lengths.reserve(tokens);
  int32_t start = 0;
  for (const auto& source : sources) {
    const int32_t length = static_cast<int32_t>(source.size());
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
  Tensor x = embed(ids_tensor(ids, options_.device), ids_tensor(positions, options_.device), Side::Source);  // [n, d]
  for (const EncoderLayer& layer : encoder_layers_) x = layer.forward_packed(x, starts, lengths, time);
  return source_norms_.after_layers(x);
}

Tensor EncoderDecoderModel::encode_joining(const std::vector<std::vector<int32_t>>& sources) const {
  if (options_.packed_encoder) return encode_packed(sources);
  Tensor lengths;
  const Tensor padded = encode_tensor(sources, lengths);  // [b, t, d]
  const int64_t time = padded.dim(1);
  std::vector<int32_t> real;  // the rows of real tokens in [b * t, d]
  for (size_t b = 0; b < sources.size(); ++b)
    for (size_t t = 0; t < sources[b].size(); ++t) real.push_back(static_cast<int32_t>(b * time + t));
  return ops::gather_rows(padded.reshape({padded.dim(0) * time, config_.d_model}), ids_tensor(real, options_.device));
}

std::unique_ptr<DecoderState> EncoderDecoderModel::start() {
  auto state = std::make_unique<EncoderDecoderState>();
  state->layers.resize(decoder_layers_.size());
  return state;
}

void EncoderDecoderModel::reserve(DecoderState& base_state, const DecoderReservation& reservation) const {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  const int64_t positions = config_.max_positions;
  // A graph pads its slots up to a bucket, so the pool holds the bucket of the most slots.
  const int64_t rows = reservation.slots > 0 ? row_bucket(reservation.slots) : 0;
  // The start token takes position 0: an output of n tokens feeds n positions.
  const int64_t capacity = std::min<int64_t>(doubled_to(kInitialCacheCapacity, reservation.target_length, 0), positions);
  grow_decoder_pool(state, std::max(rows, state.rows), std::max(capacity, state.capacity));
  grow_block_pool(state, reserved_blocks(reservation, rows));
  grow_sentence_rows(state, reservation.sentences - state.sentence_rows);
  // Without a bound on the tokens, 32 positions a sentence (the pool grows when they need more).
  grow_memory_pool(state, reservation.source_tokens > 0 ? reservation.source_tokens
                                                        : reservation.sentences * kInitialCacheCapacity);
}

void EncoderDecoderModel::admit(DecoderState& base_state, const std::vector<std::vector<int32_t>>& sources) {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  if (sources.empty()) return;
  const ProfileScope profile("encoder");
  // A sentence row each, and a run of the memory pool for its tokens.
  const int64_t missing = static_cast<int64_t>(sources.size()) - static_cast<int64_t>(state.free_sentences.size());
  grow_sentence_rows(state, missing);
  const std::vector<int32_t> starts = place_memory(state, sources);
  std::vector<int32_t> rows, pool_positions;
  for (size_t i = 0; i < sources.size(); ++i) {
    const int32_t row = take_free(state.free_sentences), length = static_cast<int32_t>(sources[i].size());
    state.source_lengths[row] = length;
    state.memory_starts[row] = starts[i];
    rows.push_back(row);
    for (int32_t t = 0; t < length; ++t) pool_positions.push_back(starts[i] + t);
  }
  try {
    encode_into_memory(state, sources, pool_positions);
  } catch (const OutOfMemoryError&) {
    // The scheduler retries with fewer sentences: the rows and runs go back, and nothing else has changed.
    for (size_t i = 0; i < rows.size(); ++i) state.memory_runs.give_back(starts[i], state.source_lengths[rows[i]]);
    state.free_sentences.insert(state.free_sentences.end(), rows.rbegin(), rows.rend());
    throw;
  }

  // One new slot per sentence, at position 0, continuing nothing, in its sentence's first lane.
  for (const int32_t row : rows) {
    state.sentence_lanes[row].assign(1, {});
    state.positions.push_back(0);
    state.sentences.push_back(row);
    state.reorder.push_back(static_cast<int32_t>(state.reorder.size()));
    state.lanes.push_back(0);
  }
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
      decoder_layers_[i].project_memory_into(memory, positions, state.layers[i]);
    first = end;
    first_token += tokens;
  }
}

void EncoderDecoderModel::grow_decoder_pool(EncoderDecoderState& state, int64_t rows, int64_t capacity) const {
  if (rows <= state.rows && capacity <= state.capacity) return;
  rows = std::max(rows, state.rows);
  capacity = std::max(capacity, state.capacity);
  state.history_lengths.resize(static_cast<size_t>(state.rows), 0);
  state.history = regrow(state.history, state.history_lengths, rows, capacity, {}, DataType::I32, options_.device);
  if (rows != state.rows) {
    state.step_inputs = Tensor({kStepInputs, rows}, DataType::I32, options_.device);
    state.sampling_rows = Tensor({rows, ops::kSamplingRowWords}, DataType::I32, options_.device);
  }
  state.rows = rows;
  state.capacity = capacity;
  state.drop_graphs();  // they point at the old buffers
}

void EncoderDecoderModel::grow_block_pool(EncoderDecoderState& state, int64_t blocks) const {
  if (blocks <= state.cache_blocks) return;
  const int64_t d = config_.d_model;
  for (DecoderLayerCache& cache : state.layers) {
    cache.self_keys =
        regrow(cache.self_keys, state.block_fill, blocks, kBlockPositions, {d}, options_.dtype, options_.device);
    cache.self_values =
        regrow(cache.self_values, state.block_fill, blocks, kBlockPositions, {d}, options_.dtype, options_.device);
  }
  state.block_fill.resize(static_cast<size_t>(blocks), 0);
  for (int64_t block = state.cache_blocks; block < blocks; ++block) state.free_blocks.push_back(static_cast<int32_t>(block));
  state.cache_blocks = blocks;
  state.drop_graphs();
}

int32_t EncoderDecoderModel::block_to_write(EncoderDecoderState& state, int64_t slot) const {
  std::vector<int32_t>& lane = state.sentence_lanes[state.sentences[slot]][state.lanes[slot]];
  const size_t index = static_cast<size_t>(state.positions[slot] / kBlockPositions);
  while (lane.size() <= index) {
    if (state.free_blocks.empty())
      grow_block_pool(state, state.cache_blocks + std::max<int64_t>(state.cache_blocks / 2, 1));
    lane.push_back(take_free(state.free_blocks));
  }
  int32_t& fill = state.block_fill[static_cast<size_t>(lane[index])];
  fill = std::max(fill, static_cast<int32_t>(state.positions[slot] % kBlockPositions + 1));
  return lane[index];
}

void EncoderDecoderModel::grow_sentence_rows(EncoderDecoderState& state, int64_t count) const {
  if (count <= 0) return;
  const int64_t rows = state.sentence_rows + count;
  for (int64_t row = rows - 1; row >= state.sentence_rows; --row) state.free_sentences.push_back(static_cast<int32_t>(row));
  state.source_lengths.resize(static_cast<size_t>(rows), 0);
  state.memory_starts.resize(static_cast<size_t>(rows), 0);
  state.sentence_lanes.resize(static_cast<size_t>(rows));
  state.sentence_rows = rows;
}

std::vector<int32_t> EncoderDecoderModel::place_memory(EncoderDecoderState& state,
                                                       const std::vector<std::vector<int32_t>>& sources) const {
  int64_t needed = 0, longest = 0;
  for (const auto& source : sources) {
    needed += static_cast<int64_t>(source.size());
    longest = std::max<int64_t>(longest, static_cast<int64_t>(source.size()));
  }
  const int64_t span = doubled_to(std::max(state.source_span, kInitialCacheCapacity), longest, config_.max_positions);
  if (span != state.source_span) {
    state.source_span = span;
    state.drop_graphs();  // they hold the span
  }
  const auto take_all = [&](std::vector<int32_t>& starts) {
    starts.clear();
    for (const auto& source : sources) {
      const int64_t start = state.memory_runs.take(static_cast<int64_t>(source.size()));
      if (start < 0) {
        for (size_t i = 0; i < starts.size(); ++i) state.memory_runs.give_back(starts[i], static_cast<int64_t>(sources[i].size()));
        return false;
      }
      starts.push_back(static_cast<int32_t>(start));
    }
    return true;
  };
  std::vector<int32_t> starts;
  if (take_all(starts)) return starts;
  // Holes too short, or too few free positions: the runs in flight move to the front, of a larger pool
  // when they and the newcomers do not fit (doubling, so that growth stays rare).
  const int64_t used = state.memory_runs.used(), size = state.memory_runs.size();
  compact_memory_pool(state, used + needed <= size ? size : std::max(used + needed, 2 * size));
  SEQTRANS_CHECK(take_all(starts), "memory pool: no room for {} positions after compaction", needed);
  return starts;
}

void EncoderDecoderModel::compact_memory_pool(EncoderDecoderState& state, int64_t positions) const {
  const ProfileScope profile("memory compaction");
  // The sentences in flight by where their runs start, and the positions they hold in that order.
  std::vector<int32_t> live;
  std::vector<char> in_flight(static_cast<size_t>(state.sentence_rows), 0);
  for (const int32_t sentence : state.sentences) in_flight[sentence] = 1;
  for (int32_t row = 0; row < state.sentence_rows; ++row)
    if (in_flight[row]) live.push_back(row);
  std::sort(live.begin(), live.end(), [&](int32_t a, int32_t b) { return state.memory_starts[a] < state.memory_starts[b]; });
  std::vector<int32_t> kept;
  for (const int32_t row : live)
    for (int32_t t = 0; t < state.source_lengths[row]; ++t) kept.push_back(state.memory_starts[row] + t);

  const int64_t size = state.memory_runs.size(), grown = std::max(positions, size), d = config_.d_model;
  const Tensor index = kept.empty() ? Tensor() : ids_tensor(kept, options_.device);
  const int64_t live_positions = static_cast<int64_t>(kept.size());
  if (live_positions > 0) ++step_counts_.memory_compactions;
  const auto compact = [&](Tensor& pool) {
    Tensor target = grown > size || !pool.defined() ? Tensor({grown, 1, d}, options_.dtype, options_.device) : pool;
    // Through a copy of one chunk of live positions at a time: moving runs within one buffer would overlap,
    // and a copy of all of them would add the pool's size to the peak. kept is ascending, so kept[i] >= i:
    // a chunk's targets lie below every source of the chunks after it.
    for (int64_t first = 0; first < live_positions; first += kCompactionChunk) {
      const int64_t last = std::min(live_positions, first + kCompactionChunk);
      const Tensor moved = ops::gather_rows(pool.reshape({size, d}), index.slice_rows(first, last));
      Tensor front = target.reshape({grown, d}).slice_rows(first, last);
      ops::copy(moved, front);
    }
    pool = target;
  };
  for (DecoderLayerCache& cache : state.layers) {
    compact(cache.cross_keys);
    compact(cache.cross_values);
  }
  state.memory_runs = PositionRuns(grown);
  for (const int32_t row : live) state.memory_starts[row] = static_cast<int32_t>(state.memory_runs.take(state.source_lengths[row]));
  if (grown > size) state.drop_graphs();  // they point at the old buffers
}

void EncoderDecoderModel::grow_memory_pool(EncoderDecoderState& state, int64_t positions) const {
  if (positions <= state.memory_runs.size()) return;
  compact_memory_pool(state, positions);
}

void EncoderDecoderModel::release_cached(DecoderState& state) const {
  static_cast<EncoderDecoderState&>(state).drop_graphs();
}

bool EncoderDecoderModel::use_graphs() const {
  return options_.cuda_graphs && options_.fused_output && ops::DeviceGraph::supported(options_.device) &&
         !Profiler::instance().enabled();
}

int64_t EncoderDecoderModel::size_step(EncoderDecoderState& state, const std::vector<int32_t>& input_ids, bool graph,
                                       int steps) const {
  const int64_t slots = state.slots();
  SEQTRANS_CHECK(static_cast<int64_t>(input_ids.size()) == slots, "step: {} ids for {} slots", input_ids.size(),
                 slots);
  SEQTRANS_CHECK(slots > 0, "step: no slots left");
  const int32_t furthest = *std::max_element(state.positions.begin(), state.positions.end()) + steps - 1;
  SEQTRANS_CHECK(furthest < config_.max_positions, "output reached the model's {} positions", config_.max_positions);

  const int64_t rows = graph ? row_bucket(slots) : slots;
  grow_decoder_pool(state, rows, doubled_to(std::max(state.capacity, kInitialCacheCapacity), furthest + 1,
                                            config_.max_positions));
  if (state.cache_blocks == 0) grow_block_pool(state, row_bucket(slots) * 2);
  return rows;
}

int64_t EncoderDecoderModel::prepare_step(EncoderDecoderState& state, const std::vector<int32_t>& input_ids,
                                          bool graph) const {
  const int64_t rows = size_step(state, input_ids, graph, 1);
  std::vector<int32_t> inputs(static_cast<size_t>(kStepInputs * state.rows));
  fill_step_inputs(state, input_ids, inputs.data());
  state.step_inputs.copy_from(Tensor::from_ints(state.step_inputs.shape(), inputs));
  return rows;
}

void EncoderDecoderModel::fill_step_inputs(EncoderDecoderState& state, const std::vector<int32_t>& input_ids,
                                           int32_t* inputs) const {
  const int64_t slots = state.slots();
  state.blocks.resize(static_cast<size_t>(slots));
  for (int64_t slot = 0; slot < slots; ++slot) state.blocks[slot] = block_to_write(state, slot);
  // Padding rows (graphs only) decode a start token at position 0 with no keys and no memory, and write
  // no cache row: they read and write nothing that a slot uses.
  std::fill(inputs, inputs + kStepInputs * state.rows, 0);
  const auto row = [&](StepInput which) { return inputs + which * state.rows; };
  std::copy(input_ids.begin(), input_ids.end(), row(kIds));
  std::fill(row(kIds) + slots, row(kIds) + state.rows, config_.decoder_start_id);
  std::copy(state.positions.begin(), state.positions.end(), row(kPositions));
  for (int64_t s = 0; s < slots; ++s) row(kKeyLengths)[s] = state.positions[s] + 1;
  for (int64_t s = 0; s < slots; ++s) {
    row(kMemoryStarts)[s] = state.memory_starts[state.sentences[s]];
    row(kSourceLengths)[s] = state.source_lengths[state.sentences[s]];
  }
  std::iota(row(kReorder), row(kReorder) + state.rows, 0);
  std::copy(state.reorder.begin(), state.reorder.end(), row(kReorder));
  std::fill(row(kCacheRows), row(kCacheRows) + state.rows, -1);
  std::copy(state.blocks.begin(), state.blocks.end(), row(kCacheRows));
  state.history_lengths.assign(row(kKeyLengths), row(kKeyLengths) + state.rows);
}

EncoderDecoderModel::DecodedStep EncoderDecoderModel::decode(EncoderDecoderState& state, int64_t rows,
                                                             const ops::PersistentGreedyOutput* greedy) const {
  const auto input = [&](StepInput which) {
    return state.step_inputs.slice_rows(which, which + 1).reshape({state.rows}).slice_rows(0, rows);
  };
  const Tensor ids = input(kIds), positions = input(kPositions), key_lengths = input(kKeyLengths);
  const Tensor memory_starts = input(kMemoryStarts), source_lengths = input(kSourceLengths);
  const Tensor cache_rows = input(kCacheRows);
  // Beam reorders since the last step move history rows only (each slot's positions so far, from the slot
  // it continues); keys and values stay in place. The step appends one position, which goes back with them.
  const Tensor reorder = input(kReorder);
  Tensor x = embed(ids, positions, Side::Target);  // [rows, d]
  // The persistent kernel reads the history through the reorder and rewrites its rows in place.
  const DecoderStepInputs in_place{positions,      key_lengths,        state.history, memory_starts,
                                   source_lengths, state.source_span, &cache_rows};
  bool selected = false;
  if (persistent_layers(state, x, in_place, reorder, greedy, selected))
    return DecodedStep{target_norms_.after_layers(x), selected};
  // The layers read a reordered copy, which then goes back.
  Tensor history({rows, state.capacity}, DataType::I32, options_.device);
  ops::copy_row_prefixes(state.history, &reorder, positions, history);
  const DecoderStepInputs inputs{positions,      key_lengths,        history,    memory_starts,
                                 source_lengths, state.source_span, &cache_rows};
  for (size_t i = 0; i < decoder_layers_.size(); ++i) x = decoder_layers_[i].step(x, state.layers[i], inputs);
  Tensor kept = state.history.slice_rows(0, rows);
  ops::copy_row_prefixes(history, nullptr, key_lengths, kept);
  return DecodedStep{target_norms_.after_layers(x), false};
}

bool EncoderDecoderModel::persistent_layers(EncoderDecoderState& state, Tensor& x, const DecoderStepInputs& inputs,
                                            const Tensor& reorder, const ops::PersistentGreedyOutput* greedy,
                                            bool& selected) const {
  const int64_t persistent_rows = options_.persistent_decode_rows == kPersistentDecodeAuto
                                      ? default_persistent_decode_rows(options_.dtype)
                                      : options_.persistent_decode_rows;
  // The kernel fuses the post-norm block ends (the residual sum, then its norm) into its phases.
  if (x.dim(0) > persistent_rows || config_.decoder.pre_norm) return false;
  std::vector<ops::PersistentDecoderLayer> layers;
  for (size_t i = 0; i < decoder_layers_.size(); ++i) layers.push_back(decoder_layers_[i].describe(state.layers[i]));
  const ops::PersistentDecoderStep step{&inputs.positions,      &inputs.key_lengths, &inputs.memory_starts,
                                        &inputs.source_lengths, inputs.cache_rows,   &inputs.history,
                                        inputs.source_span,     config_.decoder.num_heads,
                                        config_.layer_norm_epsilon, config_.activation, &reorder};
  if (!ops::persistent_decoder_fits(x, layers, step)) return false;
  ++step_counts_.persistent;
  // The folded output layer reads the last layer's rows as they are: no final norm in between.
  selected = greedy != nullptr && options_.persistent_argmax && !target_norms_.has_final() &&
             ops::persistent_output_fits(x, layers, step, *greedy);
  if (selected) ++step_counts_.persistent_argmax;
  x = ops::persistent_decoder_step(x, layers, step, selected ? greedy : nullptr);
  return true;
}

void EncoderDecoderModel::decode_and_select(EncoderDecoderState& state, int64_t rows, int k,
                                            const RepetitionRequest* repetitions, Tensor& values, Tensor& ids) const {
  const bool greedy = k == 1 && (repetitions == nullptr || !repetitions->on());
  std::optional<ops::PersistentGreedyOutput> fold;
  if (greedy) fold = output_head_.persistent_greedy(state.suppressed, values, ids);
  const DecodedStep decoded = decode(state, rows, fold ? &*fold : nullptr);
  if (!decoded.selected)
    output_head_.select(decoded.x, OutputSelection{k, &state.suppressed, repetitions, &state.sampling_rows}, values,
                        ids);
}

void EncoderDecoderModel::finish_step(EncoderDecoderState& state) {
  for (int32_t& position : state.positions) ++position;
  std::iota(state.reorder.begin(), state.reorder.end(), 0);
}

Tensor EncoderDecoderModel::step(DecoderState& base_state, const std::vector<int32_t>& input_ids) {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  const int64_t rows = prepare_step(state, input_ids, /*graph=*/false);
  const Tensor x = decode(state, rows).x;
  finish_step(state);
  const ProfileScope profile("output layer");
  Tensor result = output_head_.logits_with_bias(x);
  if (result.device() != Device::CPU) result = result.to(Device::CPU);
  return result;
}

void EncoderDecoderModel::run_step(EncoderDecoderState& state, int64_t rows, int k, bool graph,
                                   const RepetitionRequest& repetitions, StepOutputs& outputs) const {
  if (graph) {
    run_step_graph(state, rows, k, outputs);
    return;
  }
  outputs = StepOutputs(rows, k, options_.device);
  decode_and_select(state, rows, k, &repetitions, outputs.values, outputs.ids);
  ++step_counts_.launched;
}

void EncoderDecoderModel::run_step_graph(EncoderDecoderState& state, int64_t rows, int k, StepOutputs& outputs) const {
  const EncoderDecoderState::GraphKey key{rows, k, state.suppressed.current()};
  StepGraph* step_graph = nullptr;
  if (const auto recorded = state.graphs.find(key); recorded != state.graphs.end()) {
    step_graph = recorded->second.get();
    ++step_counts_.replayed;
  } else if (state.launched.insert(key).second) {
    // A shape's first step runs op by op: a shape met once (a bucket the batch passes in one step) costs
    // no recording, which takes longer than launching the ops.
    outputs = StepOutputs(rows, k, options_.device);
    decode_and_select(state, rows, k, /*repetitions=*/nullptr, outputs.values, outputs.ids);
    ++step_counts_.launched;
    return;
  } else {
    auto created = std::make_unique<StepGraph>(options_.device);
    step_graph = created.get();
    step_graph->graph.capture([&] {
      step_graph->outputs = StepOutputs(rows, k, options_.device);  // from the graph's pool
      decode_and_select(state, rows, k, nullptr, step_graph->outputs.values, step_graph->outputs.ids);
    });
    state.graphs.emplace(key, std::move(created));
    ++step_counts_.captured;
  }
  step_graph->graph.replay();
  outputs = step_graph->outputs;
}

void EncoderDecoderModel::fused_step(EncoderDecoderState& state, const std::vector<int32_t>& input_ids,
                                     const OutputRequest& request, std::vector<float>& values,
                                     std::vector<int32_t>& ids) const {
  state.suppressed.select(*request.suppressed_ids, config_.target_vocab_size, options_.device);
  const bool graph = use_graphs() && !request.repetitions->on();
  const int64_t slots = state.slots();
  const int64_t rows = prepare_step(state, input_ids, graph);
  if (request.draws != nullptr) upload_sampling_rows(state, *request.draws);
  StepOutputs outputs;
  run_step(state, rows, request.k, graph, *request.repetitions, outputs);
  finish_step(state);
  // One copy: every row's values, then every row's ids. A graph's padding rows come last in each.
  const std::vector<int32_t> both = outputs.both.to_int_vector();
  const size_t kept = static_cast<size_t>(slots * outputs.width), half = both.size() / 2;
  values.resize(kept);
  std::memcpy(values.data(), both.data(), kept * sizeof(float));
  ids.assign(both.begin() + static_cast<std::ptrdiff_t>(half), both.begin() + static_cast<std::ptrdiff_t>(half + kept));
}

void EncoderDecoderModel::step_candidates(DecoderState& base_state, const std::vector<int32_t>& input_ids,
                                          const CandidateRequest& request, StepCandidates& candidates) {
  if (!options_.fused_output) {
    StepModel::step_candidates(base_state, input_ids, request, candidates);
    return;
  }
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  candidates.slots = state.slots();
  candidates.k = request.k;
  fused_step(state, input_ids, OutputRequest{request.k, &request.suppressed_ids, &request.repetitions, nullptr},
             candidates.log_probs, candidates.ids);
}

int EncoderDecoderModel::steps_per_read() const {
  if (!options_.fused_output) return 1;
  if (options_.steps_per_read == kStepsPerReadAuto) return options_.device == Device::CUDA ? kGreedyStepsPerRead : 1;
  return std::max(options_.steps_per_read, 1);
}

void EncoderDecoderModel::step_candidates_run(DecoderState& base_state, const std::vector<int32_t>& input_ids,
                                              const std::vector<CandidateRequest>& requests,
                                              std::vector<StepCandidates>& candidates) {
  const int steps = static_cast<int>(requests.size());
  if (!options_.fused_output || steps <= 1) {
    StepModel::step_candidates_run(base_state, input_ids, requests, candidates);
    return;
  }
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  std::vector<int> lists;
  for (const CandidateRequest& request : requests) {
    check_run_request(request);
    lists.push_back(state.suppressed.select(request.suppressed_ids, config_.target_vocab_size, options_.device));
  }
  const bool graph = use_graphs();
  const int64_t slots = state.slots();
  const int64_t rows = size_step(state, input_ids, graph, steps);
  // Every step's inputs are made on the host and uploaded before any step runs: a copy from the host
  // between two steps would wait for the steps queued before it. Step j > 0 feeds slot s the token step
  // j - 1 chose for it (-(s + 1), resolved on the device).
  const int64_t width = kStepInputs * state.rows;
  std::vector<int32_t> table(static_cast<size_t>(steps * width));
  std::vector<int32_t> ids = input_ids;
  // Out of memory below, the slots go back to where they were, as after a failed single step: the caller
  // may retry with fewer sentences.
  const std::vector<int32_t> positions = state.positions, reorder = state.reorder;
  try {
    for (int j = 0; j < steps; ++j) {
      fill_step_inputs(state, ids, table.data() + j * width);
      finish_step(state);
      for (int64_t s = 0; s < slots; ++s) ids[static_cast<size_t>(s)] = -static_cast<int32_t>(s + 1);
    }
    run_steps_at_once(state, rows, graph, lists, Tensor::from_ints({steps, width}, table), candidates);
  } catch (const OutOfMemoryError&) {
    state.positions = positions;
    state.reorder = reorder;
    throw;
  }
}

void EncoderDecoderModel::run_steps_at_once(EncoderDecoderState& state, int64_t rows, bool graph,
                                            const std::vector<int>& lists, const Tensor& table,
                                            std::vector<StepCandidates>& candidates) const {
  const int64_t steps = table.dim(0), width = table.dim(1), slots = state.slots();
  const Tensor inputs = table.to(options_.device);
  Tensor step_inputs = state.step_inputs.reshape({width});
  Tensor results({steps, 2 * rows}, DataType::I32, options_.device);  // each step's values, then its ids
  StepOutputs last;  // the step before: its ids feed the next one
  const RepetitionRequest no_repetitions;
  for (int j = 0; j < steps; ++j) {
    state.suppressed.set_current(lists[static_cast<size_t>(j)]);
    ops::copy_with_fed_ids(inputs.slice_rows(j, j + 1).reshape({width}), state.rows, j > 0 ? &last.ids : nullptr,
                           step_inputs);
    run_step(state, rows, 1, graph, no_repetitions, last);  // replays the step's graph: the ids feed it
    Tensor step_results = results.slice_rows(j, j + 1).reshape({2 * rows});
    ops::copy_with_fed_ids(last.both.reshape({2 * rows}), 0, nullptr, step_results);
  }
  step_counts_.at_once += steps;
  const std::vector<int32_t> all = results.to_int_vector();  // one copy for every step
  candidates.resize(static_cast<size_t>(steps));
  for (int j = 0; j < steps; ++j) {
    StepCandidates& step = candidates[static_cast<size_t>(j)];
    const int32_t* first = all.data() + j * 2 * rows;
    step.slots = slots;
    step.k = 1;
    step.log_probs.resize(static_cast<size_t>(slots));
    std::memcpy(step.log_probs.data(), first, static_cast<size_t>(slots) * sizeof(float));
    step.ids.assign(first + rows, first + rows + slots);
  }
}

void EncoderDecoderModel::upload_sampling_rows(EncoderDecoderState& state,
                                               const std::vector<ops::SamplingRow>& draws) const {
  SEQTRANS_CHECK(static_cast<int64_t>(draws.size()) == state.slots(), "step: {} draws for {} slots", draws.size(),
                 state.slots());
  std::vector<ops::SamplingRow> padded = draws;
  padded.resize(static_cast<size_t>(state.rows));  // padding rows draw with the defaults, ignored
  state.sampling_rows.copy_from(ops::sampling_rows_tensor(padded));
}

void EncoderDecoderModel::step_samples(DecoderState& base_state, const std::vector<int32_t>& input_ids,
                                       const SampleRequest& request, StepSamples& samples) {
  if (!options_.fused_output) {
    StepModel::step_samples(base_state, input_ids, request, samples);
    return;
  }
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  fused_step(state, input_ids, OutputRequest{kSampled, &request.suppressed_ids, &request.repetitions, &request.rows},
             samples.log_probs, samples.ids);
}

void EncoderDecoderModel::select(DecoderState& base_state, const std::vector<int32_t>& sources) {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  const int64_t old_slots = state.slots();
  auto& [positions, sentences, reorder, lanes, slots_of_sentence, first_position, had_slot] = state.next;
  positions.clear();
  sentences.clear();
  reorder.clear();
  lanes.clear();
  // The k-th new slot of a sentence writes the sentence's lane k. All its slots sit at one position p, and
  // no lane of the sentence holds p yet, so any such assignment is safe.
  slots_of_sentence.assign(static_cast<size_t>(state.sentence_rows), 0);
  first_position.assign(static_cast<size_t>(state.sentence_rows), -1);
  for (int32_t source : sources) {
    SEQTRANS_CHECK(source >= 0 && source < old_slots, "select: slot {} out of {}", source, old_slots);
    const int32_t sentence = state.sentences[source], position = state.positions[source];
    int32_t& first = first_position[sentence];
    SEQTRANS_CHECK(first < 0 || first == position, "select: slots of one sentence at positions {} and {}", first,
                   position);
    first = position;
    const int32_t lane = slots_of_sentence[sentence]++;
    if (static_cast<size_t>(lane) == state.sentence_lanes[sentence].size()) state.sentence_lanes[sentence].emplace_back();
    positions.push_back(position);
    sentences.push_back(sentence);
    reorder.push_back(state.reorder[source]);
    lanes.push_back(lane);
  }
  // Sentences left with no slot leave: their row, memory run and cache blocks are free again.
  had_slot.assign(static_cast<size_t>(state.sentence_rows), 0);
  for (int32_t sentence : state.sentences) had_slot[sentence] = 1;
  for (int32_t sentence = 0; sentence < state.sentence_rows; ++sentence) {
    if (!had_slot[sentence] || slots_of_sentence[sentence] > 0) continue;
    for (const std::vector<int32_t>& lane : state.sentence_lanes[sentence])
      state.free_blocks.insert(state.free_blocks.end(), lane.begin(), lane.end());
    state.sentence_lanes[sentence].clear();
    state.memory_runs.give_back(state.memory_starts[sentence], state.source_lengths[sentence]);
    state.free_sentences.push_back(sentence);
  }
  std::swap(state.positions, positions);
  std::swap(state.sentences, sentences);
  std::swap(state.reorder, reorder);
  std::swap(state.lanes, lanes);
}

}  // namespace seqtrans
