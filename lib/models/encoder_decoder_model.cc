#include "models/encoder_decoder_model.h"

#include <algorithm>
#include <climits>
#include <map>
#include <numeric>
#include <set>

#include "core/profiler.h"
#include "ops/graph.h"

namespace seqtrans {

// One decoder step recorded as a graph for a number of rows and candidates per row, and its outputs.
struct StepGraph {
  explicit StepGraph(Device device) : graph(device) {}
  ops::DeviceGraph graph;
  Tensor values;  // [rows, k]
  Tensor ids;     // [rows, k]
};

// Decoder state of one batch: one slot per active hypothesis. Keys and values stay where they were
// written; select() changes host-side maps only, and the next step applies them on the device.
class EncoderDecoderState : public DecoderState {
 public:
  int64_t slots() const override { return static_cast<int64_t>(positions.size()); }

  // Per slot, on the host.
  std::vector<int32_t> positions;  // tokens already fed
  std::vector<int32_t> sentences;  // its source sentence (its row of the encoder memory)
  std::vector<int32_t> reorder;    // the slot of the last step it continues (identity after a step)
  std::vector<int32_t> source_lengths;  // per sentence

  // On the device. The self-attention buffers hold `rows` slots of `capacity` positions; graphs
  // recorded against them stay valid until they are reallocated.
  std::vector<DecoderLayerCache> layers;  // cross keys/values per sentence, self caches [rows, capacity, d]
  Tensor history;                         // [rows, capacity] int32, see DecoderStepInputs
  Tensor step_inputs;                     // [kStepInputs, rows] int32, uploaded once per step
  int64_t rows = 0;
  int64_t capacity = 0;
  std::map<std::pair<int64_t, int>, std::unique_ptr<StepGraph>> graphs;  // (rows, k) -> recorded step
  std::set<std::pair<int64_t, int>> launched;  // (rows, k) run op by op since the buffers last changed
  int graphs_version = -1;                     // suppressed-id version the graphs use
};

namespace {

// Most sentences end within 32 tokens; longer ones double the capacity (and record their graphs again).
constexpr int64_t kInitialCacheCapacity = 32;

// Rows of step_inputs: what one host-to-device copy per step carries.
enum StepInput { kIds, kPositions, kKeyLengths, kSentences, kSourceLengths, kReorder, kStepInputs };

Tensor ids_tensor(const std::vector<int32_t>& values, Device device) {
  Tensor host = Tensor::from_ints({static_cast<int64_t>(values.size())}, values);
  return device == Device::CPU ? host : host.to(device);
}

// Row counts a step graph is recorded for: 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers of two and 1.5x
// them). A shrinking batch reuses a graph for several steps and pads at most a third of its rows.
int64_t row_bucket(int64_t slots) {
  int64_t power = 1;
  while (power < slots) {
    if (power * 3 / 2 >= slots && power >= 2) return power * 3 / 2;
    power *= 2;
  }
  return power;
}

// A buffer of [rows, capacity, ...] keeping `old`'s contents in its leading rows and positions. The
// rest stays unwritten until used: slots read only positions they wrote, padding rows read nothing.
Tensor regrow(const Tensor& old, int64_t rows, int64_t capacity, const Shape& trailing, DataType dtype,
              Device device) {
  Shape shape{rows, capacity};
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  Tensor grown(shape, dtype, device);
  if (old.defined()) {
    Tensor leading = grown.slice_rows(0, old.dim(0));
    ops::copy_prefix(old, leading);
  }
  return grown;
}

void require_supported(const ModelFile& file, const ModelConfig& config) {
  const auto refuse_if = [&](bool unsupported, const char* field) {
    SEQTRANS_CHECK(!unsupported, "model file '{}': config.{} is not supported by this version of seqtrans",
                   file.path(), field);
  };
  refuse_if(config.encoder.pre_norm, "encoder.pre_norm");
  refuse_if(config.decoder.pre_norm, "decoder.pre_norm");
  refuse_if(config.encoder.final_layer_norm, "encoder.final_layer_norm");
  refuse_if(config.decoder.final_layer_norm, "decoder.final_layer_norm");
  refuse_if(config.encoder.embedding_layer_norm, "encoder.embedding_layer_norm");
  refuse_if(config.decoder.embedding_layer_norm, "decoder.embedding_layer_norm");
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
  if (config_.position_encoding == PositionEncoding::Learned) {
    source_positions_ = weights.get("encoder/position_embedding", {config_.max_positions, d});
    target_positions_ = weights.get("decoder/position_embedding", {config_.max_positions, d});
  }
  output_weight_ = config_.tied_output ? target_embedding_
                                       : weights.get("decoder/output/weight", {config_.target_vocab_size, d});
  // The output bias is kept in fp32: it is added to fp32 logits (see fp32_output below).
  if (config_.output_bias)
    output_bias_ = WeightLoader(file, options.device, DataType::F32).get("decoder/output/bias", {config_.target_vocab_size});
  for (int i = 0; i < config_.encoder.num_layers; ++i)
    encoder_layers_.emplace_back(weights, fmt::format("encoder/layer_{}", i), config_);
  for (int i = 0; i < config_.decoder.num_layers; ++i)
    decoder_layers_.emplace_back(weights, fmt::format("decoder/layer_{}", i), config_);
}

Tensor EncoderDecoderModel::embed(const Tensor& ids, const Tensor& positions, Side side) const {
  const bool source = side == Side::Source;
  ops::EmbeddingOptions options;
  options.scale = config_.embedding_scale;
  options.positions = config_.position_encoding;
  if (options.positions == PositionEncoding::Learned) options.position_table = source ? &source_positions_ : &target_positions_;
  return ops::embed(ids, positions, source ? source_embedding_ : target_embedding_, options);
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
  return x.reshape({batch, time, config_.d_model});
}

std::unique_ptr<DecoderState> EncoderDecoderModel::encode(const std::vector<std::vector<int32_t>>& sources) {
  const ProfileScope profile("encoder");
  auto state = std::make_unique<EncoderDecoderState>();
  const int64_t batch = static_cast<int64_t>(sources.size());
  Tensor lengths;
  const Tensor memory = encode_tensor(sources, lengths);
  const Tensor memory_rows = memory.reshape({memory.dim(0) * memory.dim(1), memory.dim(2)});
  state->positions.assign(static_cast<size_t>(batch), 0);
  state->sentences.resize(static_cast<size_t>(batch));
  std::iota(state->sentences.begin(), state->sentences.end(), 0);
  state->reorder = state->sentences;
  for (const auto& source : sources) state->source_lengths.push_back(static_cast<int32_t>(source.size()));
  state->layers.resize(decoder_layers_.size());
  for (size_t i = 0; i < decoder_layers_.size(); ++i)
    decoder_layers_[i].project_memory(memory_rows, batch, state->layers[i]);
  return state;
}

bool EncoderDecoderModel::use_graphs() const {
  return options_.cuda_graphs && options_.fused_output && ops::DeviceGraph::supported(options_.device) &&
         !Profiler::instance().enabled();
}

int64_t EncoderDecoderModel::prepare_step(EncoderDecoderState& state, const std::vector<int32_t>& input_ids,
                                          bool graph) {
  const int64_t slots = state.slots();
  SEQTRANS_CHECK(static_cast<int64_t>(input_ids.size()) == slots, "step: {} ids for {} slots", input_ids.size(),
                 slots);
  SEQTRANS_CHECK(slots > 0, "step: no slots left");
  // Cache rows are never copied: slot s writes position p at row s, which no slot's history can point
  // to yet only while all slots are at the same position.
  const int32_t position = state.positions.front();
  SEQTRANS_CHECK(std::all_of(state.positions.begin(), state.positions.end(), [&](int32_t p) { return p == position; }),
                 "step: all slots must be at the same position");
  SEQTRANS_CHECK(position < config_.max_positions, "output reached the model's {} positions", config_.max_positions);

  const int64_t rows = graph ? row_bucket(slots) : slots;
  int64_t capacity = std::max(state.capacity, kInitialCacheCapacity);
  while (capacity <= position) capacity = std::min<int64_t>(capacity * 2, config_.max_positions);
  if (rows > state.rows || capacity != state.capacity) reallocate(state, std::max(rows, state.rows), capacity);
  upload_step_inputs(state, input_ids);
  return rows;
}

void EncoderDecoderModel::reallocate(EncoderDecoderState& state, int64_t rows, int64_t capacity) const {
  const int64_t d = config_.d_model;
  for (DecoderLayerCache& cache : state.layers) {
    cache.self_keys = regrow(cache.self_keys, rows, capacity, {d}, options_.dtype, options_.device);
    cache.self_values = regrow(cache.self_values, rows, capacity, {d}, options_.dtype, options_.device);
  }
  state.history = regrow(state.history, rows, capacity, {}, DataType::I32, options_.device);
  if (rows != state.rows) state.step_inputs = Tensor({kStepInputs, rows}, DataType::I32, options_.device);
  state.rows = rows;
  state.capacity = capacity;
  state.graphs.clear();  // they point at the old buffers
  state.launched.clear();
}

void EncoderDecoderModel::upload_step_inputs(EncoderDecoderState& state, const std::vector<int32_t>& input_ids) const {
  const int64_t slots = state.slots();
  const int32_t position = state.positions.front();
  // Padding rows (graphs only) decode a start token at the same position, attending to no earlier key:
  // they write only where nothing has been written yet and read nothing the slots wrote.
  std::vector<int32_t> inputs(static_cast<size_t>(kStepInputs * state.rows), 0);
  const auto row = [&](StepInput which) { return inputs.begin() + which * state.rows; };
  std::copy(input_ids.begin(), input_ids.end(), row(kIds));
  std::fill(row(kIds) + slots, row(kIds) + state.rows, config_.decoder_start_id);
  std::fill(row(kPositions), row(kPositions) + state.rows, position);
  std::fill(row(kKeyLengths), row(kKeyLengths) + slots, position + 1);
  std::copy(state.sentences.begin(), state.sentences.end(), row(kSentences));
  std::fill(row(kSourceLengths), row(kSourceLengths) + state.rows, state.source_lengths.front());
  for (int64_t s = 0; s < slots; ++s) row(kSourceLengths)[s] = state.source_lengths[state.sentences[s]];
  std::iota(row(kReorder), row(kReorder) + state.rows, 0);
  std::copy(state.reorder.begin(), state.reorder.end(), row(kReorder));
  state.step_inputs.copy_from(Tensor::from_ints(state.step_inputs.shape(), inputs));
}

Tensor EncoderDecoderModel::decode(EncoderDecoderState& state, int64_t rows) const {
  const auto input = [&](StepInput which) {
    return state.step_inputs.slice_rows(which, which + 1).reshape({state.rows}).slice_rows(0, rows);
  };
  const Tensor ids = input(kIds), positions = input(kPositions), key_lengths = input(kKeyLengths);
  const Tensor sentences = input(kSentences), source_lengths = input(kSourceLengths);
  // Beam reorders since the last step move history rows only; keys and values stay in place.
  Tensor history = ops::gather_rows(state.history, input(kReorder));  // [rows, capacity]
  const DecoderStepInputs inputs{positions, key_lengths, history, sentences, source_lengths};

  // Every layer sees all cache rows: after the batch shrinks, slots still read keys that rows past them hold.
  Tensor x = embed(ids, positions, Side::Target);  // [rows, d]
  for (size_t i = 0; i < decoder_layers_.size(); ++i) x = decoder_layers_[i].step(x, state.layers[i], inputs);
  Tensor kept = state.history.slice_rows(0, rows);
  ops::copy(history, kept);
  return x;
}

void EncoderDecoderModel::finish_step(EncoderDecoderState& state) {
  for (int32_t& position : state.positions) ++position;
  std::iota(state.reorder.begin(), state.reorder.end(), 0);
}

Tensor EncoderDecoderModel::logits(const Tensor& x) const {
  ops::MatmulOptions options;
  options.fp32_output = true;
  return ops::matmul(x, output_weight_, options);  // [rows, V]
}

Tensor EncoderDecoderModel::step(DecoderState& base_state, const std::vector<int32_t>& input_ids) {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  const int64_t rows = prepare_step(state, input_ids, /*graph=*/false);
  const Tensor x = decode(state, rows);
  finish_step(state);
  const ProfileScope profile("output layer");
  Tensor result = logits(x);
  if (output_bias_.defined()) ops::add_bias(result, output_bias_);
  if (result.device() != Device::CPU) result = result.to(Device::CPU);
  return result;
}

void EncoderDecoderModel::select_candidates(const Tensor& x, int k, Tensor& values, Tensor& ids) const {
  const ProfileScope profile("output layer");
  // Logits stay where they are computed: the fused kernel adds the bias, normalizes and selects.
  ops::TopkOptions options;
  options.k = k;
  options.bias = output_bias_.defined() ? &output_bias_ : nullptr;
  options.suppressed_ids = suppressed_host_.empty() ? nullptr : &suppressed_device_;
  options.algorithm = options_.topk_algorithm;
  ops::log_softmax_topk(logits(x), options, values, ids);
}

void EncoderDecoderModel::run_step_graph(EncoderDecoderState& state, int64_t rows, int k, Tensor& values,
                                         Tensor& ids) {
  if (state.graphs_version != suppressed_version_) {
    state.graphs.clear();
    state.launched.clear();
    state.graphs_version = suppressed_version_;
  }
  const std::pair<int64_t, int> key{rows, k};
  StepGraph* step_graph = nullptr;
  if (const auto recorded = state.graphs.find(key); recorded != state.graphs.end()) {
    step_graph = recorded->second.get();
    ++step_counts_.replayed;
  } else if (state.launched.insert(key).second) {
    // A shape's first step runs op by op: a shape met once (a bucket the shrinking batch passes in one
    // step) costs no recording, which takes longer than launching the ops.
    select_candidates(decode(state, rows), k, values, ids);
    ++step_counts_.launched;
    return;
  } else {
    // Slots only shrink: graphs for more rows will not be replayed again.
    state.graphs.erase(state.graphs.upper_bound({rows, INT32_MAX}), state.graphs.end());
    auto created = std::make_unique<StepGraph>(options_.device);
    step_graph = created.get();
    step_graph->graph.capture([&] { select_candidates(decode(state, rows), k, step_graph->values, step_graph->ids); });
    state.graphs.emplace(key, std::move(created));
    ++step_counts_.captured;
  }
  step_graph->graph.replay();
  values = step_graph->values;
  ids = step_graph->ids;
}

void EncoderDecoderModel::step_candidates(DecoderState& base_state, const std::vector<int32_t>& input_ids,
                                          const CandidateRequest& request, StepCandidates& candidates) {
  if (!options_.fused_output) {
    StepModel::step_candidates(base_state, input_ids, request, candidates);
    return;
  }
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  if (request.suppressed_ids != suppressed_host_) {  // usually the same list every step: copy it once
    suppressed_host_ = request.suppressed_ids;
    suppressed_device_ = ids_tensor(suppressed_host_, options_.device);
    ++suppressed_version_;
  }
  const bool graph = use_graphs();
  const int64_t slots = state.slots();
  const int64_t rows = prepare_step(state, input_ids, graph);
  Tensor values, ids;
  if (graph) {
    run_step_graph(state, rows, request.k, values, ids);
  } else {
    select_candidates(decode(state, rows), request.k, values, ids);
    ++step_counts_.launched;
  }
  finish_step(state);
  std::vector<float> log_probs = values.to_float_vector();
  std::vector<int32_t> best = ids.to_int_vector();
  log_probs.resize(static_cast<size_t>(slots * request.k));
  best.resize(static_cast<size_t>(slots * request.k));
  candidates.slots = slots;
  candidates.k = request.k;
  candidates.log_probs = std::move(log_probs);
  candidates.ids = std::move(best);
}

void EncoderDecoderModel::select(DecoderState& base_state, const std::vector<int32_t>& sources) {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  std::vector<int32_t> positions, sentences, reorder;
  positions.reserve(sources.size());
  sentences.reserve(sources.size());
  reorder.reserve(sources.size());
  for (int32_t source : sources) {
    SEQTRANS_CHECK(source >= 0 && source < state.slots(), "select: slot {} out of {}", source, state.slots());
    positions.push_back(state.positions[source]);
    sentences.push_back(state.sentences[source]);
    reorder.push_back(state.reorder[source]);
  }
  state.positions = std::move(positions);
  state.sentences = std::move(sentences);
  state.reorder = std::move(reorder);
}

}  // namespace seqtrans
