#include "models/tensor_specs.h"

#include <utility>

#include <cmath>
#include <random>

namespace seqtrans {
namespace {

void add_dense(std::vector<TensorSpec>& specs, const std::string& scope, int64_t in, int64_t out) {
  specs.push_back({scope + "/weight", {out, in}, TensorRole::Weight});
  specs.push_back({scope + "/bias", {out}, TensorRole::Bias});
}

void add_norm(std::vector<TensorSpec>& specs, const std::string& scope, int64_t width) {
  specs.push_back({scope + "/gamma", {width}, TensorRole::NormScale});
  specs.push_back({scope + "/beta", {width}, TensorRole::NormShift});
}

void add_self_attention(std::vector<TensorSpec>& specs, const std::string& scope, int64_t d) {
  add_dense(specs, scope + "/qkv", d, 3 * d);
  add_dense(specs, scope + "/output", d, d);
  add_norm(specs, scope + "/norm", d);
}

void add_ffn(std::vector<TensorSpec>& specs, const std::string& scope, int64_t d, int64_t ffn) {
  add_dense(specs, scope + "/inner", d, ffn);
  add_dense(specs, scope + "/outer", ffn, d);
  add_norm(specs, scope + "/norm", d);
}

}  // namespace

std::vector<TensorSpec> model_tensor_specs(const ModelConfig& config) {
  std::vector<TensorSpec> specs;
  const int64_t d = config.d_model;
  if (config.shared_embeddings) {
    specs.push_back({"shared/embedding", {config.source_vocab_size, d}, TensorRole::Embedding});
  } else {
    specs.push_back({"encoder/embedding", {config.source_vocab_size, d}, TensorRole::Embedding});
    specs.push_back({"decoder/embedding", {config.target_vocab_size, d}, TensorRole::Embedding});
  }
  if (config.position_encoding == PositionEncoding::Learned) {
    const int64_t rows = int64_t{config.max_positions} + config.position_offset;
    specs.push_back({"encoder/position_embedding", {rows, d}, TensorRole::Embedding});
    specs.push_back({"decoder/position_embedding", {rows, d}, TensorRole::Embedding});
  }
  for (const auto& [stack, name] : {std::pair{&config.encoder, "encoder"}, std::pair{&config.decoder, "decoder"}}) {
    if (stack->embedding_layer_norm) add_norm(specs, std::string(name) + "/embedding_norm", d);
    if (stack->final_layer_norm) add_norm(specs, std::string(name) + "/final_norm", d);
  }
  for (int i = 0; i < config.encoder.num_layers; ++i) {
    const std::string scope = "encoder/layer_" + std::to_string(i);
    add_self_attention(specs, scope + "/self_attention", d);
    add_ffn(specs, scope + "/ffn", d, config.encoder.ffn_dim);
  }
  for (int i = 0; i < config.decoder.num_layers; ++i) {
    const std::string scope = "decoder/layer_" + std::to_string(i);
    add_self_attention(specs, scope + "/self_attention", d);
    add_dense(specs, scope + "/cross_attention/query", d, d);
    add_dense(specs, scope + "/cross_attention/kv", d, 2 * d);
    add_dense(specs, scope + "/cross_attention/output", d, d);
    add_norm(specs, scope + "/cross_attention/norm", d);
    add_ffn(specs, scope + "/ffn", d, config.decoder.ffn_dim);
  }
  if (!config.tied_output)
    specs.push_back({"decoder/output/weight", {config.target_vocab_size, d}, TensorRole::Weight});
  if (config.output_bias)
    specs.push_back({"decoder/output/bias", {config.target_vocab_size}, TensorRole::Bias});
  return specs;
}

ModelFile make_random_model(const ModelConfig& config, const RandomModelOptions& options) {
  std::mt19937_64 rng(options.seed);
  std::normal_distribution<float> normal(0.0f, options.spread);
  std::map<std::string, Tensor> tensors;
  for (const TensorSpec& spec : model_tensor_specs(config)) {
    Tensor tensor(spec.shape, DataType::F32);
    float* values = tensor.data<float>();
    const float mean = spec.role == TensorRole::NormScale ? 1.0f : 0.0f;
    for (int64_t i = 0; i < tensor.elements(); ++i) values[i] = mean + normal(rng);
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
