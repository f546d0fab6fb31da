#include "models/tensor_specs.h"

#include <cmath>
#include <random>
#include <thread>
#include <utility>
#include <vector>

namespace seqtrans {
namespace {

void add_dense(std::vector<TensorSpec>& specs, const std::string& scope, int64_t in, int64_t out, bool bias = true) {
  specs.push_back({scope + "/weight", {out, in}, TensorRole::Weight});
  if (bias) specs.push_back({scope + "/bias", {out}, TensorRole::Bias});
}

// A layer norm has a scale and a shift; an RMS norm only the scale.
void add_norm(std::vector<TensorSpec>& specs, const std::string& scope, int64_t width, NormKind kind) {
  specs.push_back({scope + "/gamma", {width}, TensorRole::NormScale});
  if (kind == NormKind::LayerNorm) specs.push_back({scope + "/beta", {width}, TensorRole::NormShift});
}

// Queries of every head, then keys and values of each key/value head, fused in one projection.
void add_self_attention(std::vector<TensorSpec>& specs, const std::string& scope, const ModelConfig& config,
                        const StackConfig& stack) {
  const int64_t d = config.d_model, head = head_width(config, stack);
  const int64_t queries = stack.num_heads * head, keys = key_value_heads(stack) * head;
  add_dense(specs, scope + "/qkv", d, queries + 2 * keys, config.attention_bias);
  add_dense(specs, scope + "/output", queries, d, config.attention_bias);
  add_norm(specs, scope + "/norm", d, config.norm);
}

// A gated feed-forward's inner projection holds the gate's rows, then the up projection's.
void add_ffn(std::vector<TensorSpec>& specs, const std::string& scope, const ModelConfig& config, int64_t ffn) {
  const int64_t d = config.d_model;
  add_dense(specs, scope + "/inner", d, config.gated_ffn ? 2 * ffn : ffn, config.ffn_bias);
  add_dense(specs, scope + "/outer", ffn, d, config.ffn_bias);
  add_norm(specs, scope + "/norm", d, config.norm);
}

void add_cross_attention(std::vector<TensorSpec>& specs, const std::string& scope, const ModelConfig& config) {
  const int64_t d = config.d_model;
  add_dense(specs, scope + "/query", d, d);
  add_dense(specs, scope + "/kv", d, 2 * d);
  add_dense(specs, scope + "/output", d, d);
  add_norm(specs, scope + "/norm", d, config.norm);
}

}  // namespace

std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config) {
  std::vector<TensorSpec> specs;
  const int64_t d = config.d_model;
  const bool encoder_decoder = config.kind == ModelKind::EncoderDecoder;
  if (config.shared_embeddings) {
    specs.push_back({"shared/embedding", {config.source_vocab_size, d}, TensorRole::Embedding});
  } else {
    if (encoder_decoder)
      specs.push_back({"encoder/embedding", {config.source_vocab_size, d}, TensorRole::Embedding});
    specs.push_back({"decoder/embedding", {config.target_vocab_size, d}, TensorRole::Embedding});
  }
  std::vector<std::pair<const StackConfig*, std::string>> stacks;
  if (encoder_decoder) stacks.emplace_back(&config.encoder, "encoder");
  stacks.emplace_back(&config.decoder, "decoder");
  if (config.position_encoding == PositionEncoding::Learned && !config.rope_theta) {
    const int64_t rows = int64_t{config.max_positions} + config.position_offset;
    for (const auto& [stack, name] : stacks)
      specs.push_back({name + "/position_embedding", {rows, d}, TensorRole::Embedding});
  }
  for (const auto& [stack, name] : stacks) {
    if (stack->embedding_layer_norm) add_norm(specs, name + "/embedding_norm", d, config.norm);
    if (stack->final_layer_norm) add_norm(specs, name + "/final_norm", d, config.norm);
  }
  for (const auto& [stack, name] : stacks) {
    for (int i = 0; i < stack->num_layers; ++i) {
      const std::string scope = name + "/layer_" + std::to_string(i);
      add_self_attention(specs, scope + "/self_attention", config, *stack);
      if (encoder_decoder && stack == &config.decoder) add_cross_attention(specs, scope + "/cross_attention", config);
      add_ffn(specs, scope + "/ffn", config, stack->ffn_dim);
    }
  }
  if (!config.tied_output)
    specs.push_back({"decoder/output/weight", {config.target_vocab_size, d}, TensorRole::Weight});
  if (config.output_bias)
    specs.push_back({"decoder/output/bias", {config.target_vocab_size}, TensorRole::Bias});
  return specs;
}

namespace {

uint64_t mix_bits(uint64_t x) {  // splitmix64's finalizer: every input bit moves every output bit
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// values[i] = mean + a uniform draw of standard deviation `spread`, keyed by (stream, i), on every core.
void fill_quick(float* values, int64_t count, uint64_t stream, float mean, float spread) {
  const float half_width = spread * std::sqrt(3.0f);
  const auto fill = [&](int64_t begin, int64_t end) {
    for (int64_t i = begin; i < end; ++i) {
      const double unit = static_cast<double>(mix_bits(stream + static_cast<uint64_t>(i)) >> 11) * 0x1.0p-53;
      values[i] = mean + half_width * static_cast<float>(2.0 * unit - 1.0);
    }
  };
  const int64_t parts = count < (int64_t{1} << 20) ? 1 : std::max(1u, std::thread::hardware_concurrency());
  std::vector<std::thread> threads;
  for (int64_t p = 1; p < parts; ++p) threads.emplace_back(fill, count * p / parts, count * (p + 1) / parts);
  fill(0, count / parts);
  for (std::thread& thread : threads) thread.join();
}

}  // namespace

ModelFile make_random_model(const ModelConfig& config, const RandomModelOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::normal_distribution<float> normal(0.0f, options.spread);
  std::map<std::string, Tensor> tensors;
  uint64_t stream = mix_bits(options.seed);
  for (const TensorSpec& spec : model_tensor_specs(config)) {
    Tensor tensor(spec.shape, DataType::F32);
    float* values = tensor.data<float>();
    const float mean = spec.role == TensorRole::NormScale ? 1.0f : 0.0f;
    if (options.quick) {
      fill_quick(values, tensor.elements(), stream, mean, options.spread);
      stream = mix_bits(stream + static_cast<uint64_t>(tensor.elements()));
    } else {
      for (int64_t i = 0; i < tensor.elements(); ++i) values[i] = mean + normal(rng);
    }
    tensors.emplace(spec.name, std::move(tensor));
  }
  return ModelFile::from_parts("random model", config, TokenizerConfig{}, std::move(tensors));
}

ModelConfig transformer_base_config() {
  ModelConfig config;
  config.d_model = 512;
  config.encoder = {6, 8, 2048, false, false, false};
  config.decoder = {6, 8, 2048, false, false, false};
  config.activation = Activation::Relu;
  config.layer_norm_epsilon = 1e-5f;
  config.position_encoding = PositionEncoding::SinusoidalSplit;
  config.max_positions = 1024;
  config.embedding_scale = std::sqrt(512.0f);
  config.shared_embeddings = true;
  config.tied_output = true;
  config.source_vocab_size = 32000;
  config.target_vocab_size = 32000;
  config.eos_id = 0;
  config.unk_id = 1;
  config.pad_id = 31999;
  config.decoder_start_id = 31999;
  config.output_bias = true;
  config.suppressed_ids = {31999};
  return config;
}

}  // namespace seqtrans
