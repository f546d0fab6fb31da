#include "models/encoder_decoder_model.h"

#include <algorithm>

#include "core/device_copy.h"
#include "core/profiler.h"

namespace seqtrans {
namespace {

// Decoder state of one batch: one slot per active hypothesis, each with its own position.
class EncoderDecoderState : public DecoderState {
 public:
  int64_t slots() const override { return static_cast<int64_t>(positions.size()); }

  std::vector<int32_t> positions;  // [s] host copy: tokens already fed per slot
  std::vector<int32_t> sentences;  // [s] the source sentence of each slot (its encoder memory)
  Tensor source_lengths;           // [s] int32 on the device
  int64_t capacity = 0;            // self-attention cache length per slot
  std::vector<DecoderLayerCache> layers;
};

constexpr int64_t kInitialCacheCapacity = 16;

Tensor ids_tensor(const std::vector<int32_t>& values, Device device) {
  Tensor host = Tensor::from_ints({static_cast<int64_t>(values.size())}, values);
  return device == Device::CPU ? host : host.to(device);
}

// Copies each slot's rows into a longer cache; growth doubles, so it happens O(log length) times.
Tensor grow_cache(const Tensor& cache, int64_t capacity) {
  const int64_t slots = cache.dim(0), old_capacity = cache.dim(1), width = cache.dim(2);
  Tensor grown({slots, capacity, width}, cache.dtype(), cache.device());
  const size_t element = dtype_size(cache.dtype());
  for (int64_t s = 0; s < slots; ++s) {
    copy_bytes(cache.device(), static_cast<char*>(grown.raw()) + s * capacity * width * element, cache.device(),
               static_cast<const char*>(cache.raw()) + s * old_capacity * width * element,
               old_capacity * width * element);
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
  const Tensor memory = encode_tensor(sources, state->source_lengths);
  const Tensor memory_rows = memory.reshape({memory.dim(0) * memory.dim(1), memory.dim(2)});
  state->positions.assign(static_cast<size_t>(batch), 0);
  for (int32_t b = 0; b < static_cast<int32_t>(batch); ++b) state->sentences.push_back(b);
  state->capacity = kInitialCacheCapacity;
  state->layers.resize(decoder_layers_.size());
  for (size_t i = 0; i < decoder_layers_.size(); ++i) {
    DecoderLayerCache& cache = state->layers[i];
    decoder_layers_[i].project_memory(memory_rows, batch, cache);
    cache.self_keys = Tensor({batch, state->capacity, config_.d_model}, options_.dtype, options_.device);
    cache.self_values = Tensor({batch, state->capacity, config_.d_model}, options_.dtype, options_.device);
  }
  return state;
}

Tensor EncoderDecoderModel::decode(DecoderState& base_state, const std::vector<int32_t>& input_ids) {
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  const int64_t slots = state.slots();
  SEQTRANS_CHECK(static_cast<int64_t>(input_ids.size()) == slots, "step: {} ids for {} slots", input_ids.size(),
                 slots);
  const int32_t furthest = slots == 0 ? 0 : *std::max_element(state.positions.begin(), state.positions.end());
  SEQTRANS_CHECK(furthest < config_.max_positions, "output reached the model's {} positions", config_.max_positions);
  if (furthest >= state.capacity) {
    const int64_t capacity = std::min<int64_t>(state.capacity * 2, config_.max_positions);
    for (DecoderLayerCache& cache : state.layers) {
      cache.self_keys = grow_cache(cache.self_keys, capacity);
      cache.self_values = grow_cache(cache.self_values, capacity);
    }
    state.capacity = capacity;
  }

  // One host-to-device copy per step carries the ids, positions and key lengths ([3, s]).
  std::vector<int32_t> step_inputs(input_ids);
  step_inputs.insert(step_inputs.end(), state.positions.begin(), state.positions.end());
  for (int32_t position : state.positions) step_inputs.push_back(position + 1);
  const Tensor packed = ids_tensor(step_inputs, options_.device).reshape({3, slots});
  const Tensor ids = packed.slice_rows(0, 1).reshape({slots});
  const Tensor positions = packed.slice_rows(1, 2).reshape({slots});
  const Tensor lengths = packed.slice_rows(2, 3).reshape({slots});
  const DecoderStepInputs inputs{positions, lengths, state.source_lengths};

  Tensor x = embed(ids, positions, Side::Target);  // [s, d]
  for (size_t i = 0; i < decoder_layers_.size(); ++i) x = decoder_layers_[i].step(x, state.layers[i], inputs);
  for (int32_t& position : state.positions) ++position;
  return x;
}

Tensor EncoderDecoderModel::step(DecoderState& state, const std::vector<int32_t>& input_ids) {
  const Tensor x = decode(state, input_ids);
  const ProfileScope profile("output layer");
  Tensor logits = ops::matmul(x, output_weight_, {/*transpose_b=*/true, 1.0f, /*fp32_output=*/true});  // [s, V]
  if (output_bias_.defined()) ops::add_bias(logits, output_bias_);
  if (logits.device() != Device::CPU) logits = logits.to(Device::CPU);
  return logits;
}

void EncoderDecoderModel::step_candidates(DecoderState& state, const std::vector<int32_t>& input_ids,
                                          const CandidateRequest& request, StepCandidates& candidates) {
  if (!options_.fused_output) {
    StepModel::step_candidates(state, input_ids, request, candidates);
    return;
  }
  const Tensor x = decode(state, input_ids);
  const ProfileScope profile("output layer");
  // Logits stay where they are computed: the fused kernel adds the bias, normalizes and selects, and
  // only [slots, k] values and ids are copied back.
  const Tensor logits = ops::matmul(x, output_weight_, {/*transpose_b=*/true, 1.0f, /*fp32_output=*/true});  // [s, V]
  if (request.suppressed_ids != suppressed_host_) {  // usually the same list every step: copy it once
    suppressed_host_ = request.suppressed_ids;
    suppressed_device_ = ids_tensor(suppressed_host_, options_.device);
  }
  const Tensor& suppressed = suppressed_device_;
  ops::TopkOptions options;
  options.k = request.k;
  options.bias = output_bias_.defined() ? &output_bias_ : nullptr;
  options.suppressed_ids = request.suppressed_ids.empty() ? nullptr : &suppressed;
  options.algorithm = options_.topk_algorithm;
  Tensor values, ids;
  ops::log_softmax_topk(logits, options, values, ids);
  candidates.slots = logits.dim(0);
  candidates.k = request.k;
  candidates.log_probs = values.to_float_vector();
  candidates.ids = ids.to_int_vector();
}

void EncoderDecoderModel::select(DecoderState& base_state, const std::vector<int32_t>& sources) {
  const ProfileScope profile("cache reorder");
  auto& state = static_cast<EncoderDecoderState&>(base_state);
  const Tensor indices = ids_tensor(sources, options_.device);
  std::vector<int32_t> positions, sentences;
  positions.reserve(sources.size());
  sentences.reserve(sources.size());
  for (int32_t source : sources) {
    SEQTRANS_CHECK(source >= 0 && source < state.slots(), "select: slot {} out of {}", source, state.slots());
    positions.push_back(state.positions[source]);
    sentences.push_back(state.sentences[source]);
  }
  state.positions = std::move(positions);
  for (DecoderLayerCache& cache : state.layers) {
    cache.self_keys = ops::gather_rows(cache.self_keys, indices);
    cache.self_values = ops::gather_rows(cache.self_values, indices);
  }
  // Beams of one sentence share its encoder memory: a reorder among them leaves every slot's memory as
  // it was, so the cross-attention keys and values move only when the slot -> sentence map changes.
  if (sentences == state.sentences) return;
  state.sentences = std::move(sentences);
  state.source_lengths = ops::gather_rows(state.source_lengths, indices);
  for (DecoderLayerCache& cache : state.layers) {
    cache.cross_keys = ops::gather_rows(cache.cross_keys, indices);
    cache.cross_values = ops::gather_rows(cache.cross_values, indices);
  }
}

}  // namespace seqtrans
