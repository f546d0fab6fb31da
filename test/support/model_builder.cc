#include "support/model_builder.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <cmath>
#include <cstdlib>
#include <random>

#include "core/error.h"
#include "models/tensor_specs.h"

namespace seqtrans::testing {
namespace {

// Random fp32 bytes for one tensor: normal(mean, spread).
std::string random_bytes(const Shape& shape, float mean, float spread, std::mt19937& rng) {
  const int64_t count = shape_elements(shape);
  std::normal_distribution<float> normal(mean, spread);
  std::string bytes(static_cast<size_t>(count) * sizeof(float), '\0');
  float* values = reinterpret_cast<float*>(bytes.data());
  for (int64_t i = 0; i < count; ++i) values[i] = normal(rng);
  return bytes;
}

ModelConfig tiny_config(const TinyModelShape& shape) {
  ModelConfig config;
  config.d_model = shape.d_model;
  config.encoder = {shape.encoder_layers, shape.heads, shape.ffn, false, false, false};
  config.decoder = {shape.decoder_layers, shape.heads, shape.ffn, false, false, false};
  config.activation = Activation::Swish;
  config.max_positions = shape.max_positions;
  config.embedding_scale = std::sqrt(static_cast<float>(shape.d_model));
  config.source_vocab_size = config.target_vocab_size = shape.vocab;
  config.eos_id = 0;
  config.unk_id = 1;
  config.pad_id = config.decoder_start_id = shape.vocab - 1;
  config.output_bias = true;
  config.suppressed_ids = {shape.vocab - 1};
  return config;
}

// The config's tensors (names from the library, so test files and the loader never disagree), random.
void add_random_tensors(ModelImage& image, const ModelConfig& config, float spread, uint32_t seed) {
  std::mt19937 rng(seed);
  for (const TensorSpec& spec : model_tensor_specs(config)) {
    proto::TensorEntry* entry = image.header.add_tensors();
    entry->set_name(spec.name);
    entry->set_dtype(proto::FP32);
    for (int64_t extent : spec.shape) entry->add_shape(static_cast<uint64_t>(extent));
    const float mean = spec.role == TensorRole::NormScale ? 1.0f : 0.0f;
    image.tensor_bytes.push_back(random_bytes(spec.shape, mean, spread, rng));
    entry->set_size(image.tensor_bytes.back().size());
  }
}

ModelConfig tiny_llama_config(const TinyLlamaShape& shape) {
  ModelConfig config;
  config.kind = ModelKind::DecoderOnly;
  config.d_model = shape.d_model;
  config.decoder = {shape.layers, shape.heads, shape.ffn, true, true, false, shape.kv_heads, shape.head_dim};
  config.activation = Activation::Swish;
  config.norm = NormKind::RmsNorm;
  config.rope_theta = shape.rope_theta;
  config.max_positions = shape.max_positions;
  config.shared_embeddings = false;
  config.tied_output = shape.tied_output;
  config.target_vocab_size = shape.vocab;
  config.gated_ffn = true;
  config.attention_bias = config.ffn_bias = false;
  config.unk_id = 0;
  config.bos_id = config.decoder_start_id = 1;
  config.eos_id = config.pad_id = 2;
  return config;
}

}  // namespace

ModelImage make_tiny_llama_model(const TinyLlamaShape& shape) {
  const ModelConfig config = tiny_llama_config(shape);
  ModelImage image;
  proto::ModelHeader& header = image.header;
  header.set_format_version(3);
  header.set_description("random decoder-only test model");
  proto::ModelConfig* out = header.mutable_config();
  out->set_kind(proto::DECODER_ONLY);
  out->set_d_model(config.d_model);
  proto::StackConfig* stack = out->mutable_decoder();
  stack->set_num_layers(config.decoder.num_layers);
  stack->set_num_heads(config.decoder.num_heads);
  stack->set_num_kv_heads(config.decoder.num_kv_heads);
  stack->set_head_dim(config.decoder.head_dim);
  stack->set_ffn_dim(config.decoder.ffn_dim);
  stack->set_pre_norm(true);
  stack->set_final_layer_norm(true);
  out->set_activation(proto::SWISH);
  out->set_norm(proto::RMS_NORM);
  out->set_layer_norm_epsilon(1e-5f);
  out->set_position_encoding(proto::ROTARY);
  out->set_rope_theta(shape.rope_theta);
  out->set_max_positions(config.max_positions);
  out->set_embedding_scale(1.0f);
  out->set_tied_output(config.tied_output);
  out->set_target_vocab_size(config.target_vocab_size);
  out->set_gated_ffn(true);
  out->set_no_attention_bias(true);
  out->set_no_ffn_bias(true);
  out->set_unk_id(config.unk_id);
  out->set_bos_id(config.bos_id);
  out->set_decoder_start_id(config.decoder_start_id);
  out->set_eos_id(config.eos_id);
  out->set_pad_id(config.pad_id);
  header.mutable_tokenizer()->set_target_spm("not a real sentencepiece model");
  header.mutable_tokenizer()->set_add_bos(true);
  header.mutable_tokenizer()->set_space_prefix(proto::SPACE_PREFIX_FIRST);
  add_random_tensors(image, config, shape.weight_spread, shape.seed);
  return image;
}

ModelImage make_tiny_model(const TinyModelShape& shape) {
  const ModelConfig config = tiny_config(shape);
  ModelImage image;
  proto::ModelHeader& header = image.header;
  header.set_format_version(1);
  header.set_description("random test model");
  proto::ModelConfig* out = header.mutable_config();
  out->set_d_model(config.d_model);
  for (auto [stack, source] : {std::pair{out->mutable_encoder(), &config.encoder}, std::pair{out->mutable_decoder(), &config.decoder}}) {
    stack->set_num_layers(source->num_layers);
    stack->set_num_heads(source->num_heads);
    stack->set_ffn_dim(source->ffn_dim);
  }
  out->set_activation(proto::SWISH);
  out->set_layer_norm_epsilon(config.layer_norm_epsilon);
  out->set_position_encoding(proto::SINUSOIDAL_SPLIT);
  out->set_max_positions(config.max_positions);
  out->set_embedding_scale(config.embedding_scale);
  out->set_shared_embeddings(config.shared_embeddings);
  out->set_tied_output(config.tied_output);
  out->set_source_vocab_size(config.source_vocab_size);
  out->set_target_vocab_size(config.target_vocab_size);
  out->set_eos_id(config.eos_id);
  out->set_unk_id(config.unk_id);
  out->set_pad_id(config.pad_id);
  out->set_decoder_start_id(config.decoder_start_id);
  out->set_output_bias(config.output_bias);
  for (int32_t id : config.suppressed_ids) out->add_suppressed_ids(id);
  header.mutable_tokenizer()->set_source_spm("not a real sentencepiece model");
  header.mutable_tokenizer()->set_target_spm("not a real sentencepiece model");

  add_random_tensors(image, config, shape.weight_spread, shape.seed);
  return image;
}

void write_model_file(const std::string& path, const ModelImage& original) {
  proto::ModelHeader header = original.header;
  uint64_t offset = 0;
  for (int i = 0; i < header.tensors_size(); ++i) {
    header.mutable_tensors(i)->set_offset(offset);
    offset += (original.tensor_bytes[i].size() + 63) / 64 * 64;
  }
  const std::string serialized = header.SerializeAsString();
  std::ofstream out(path, std::ios::binary);
  out.write("SEQTRNS\0", 8);
  const uint64_t header_size = serialized.size();
  out.write(reinterpret_cast<const char*>(&header_size), 8);
  out.write(serialized.data(), static_cast<std::streamsize>(serialized.size()));
  const uint64_t written = 16 + serialized.size();
  out.write(std::string((64 - written % 64) % 64, '\0').data(), static_cast<std::streamsize>((64 - written % 64) % 64));
  for (const std::string& bytes : original.tensor_bytes) {
    out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
    const size_t padding = (64 - bytes.size() % 64) % 64;
    out.write(std::string(padding, '\0').data(), static_cast<std::streamsize>(padding));
  }
  SEQTRANS_CHECK(out.good(), "cannot write test model {}", path);
}

std::string temp_path(const std::string& stem) {
  static std::atomic<int> counter{0};
  const char* directory = std::getenv("TMPDIR");
  return std::string(directory ? directory : "/tmp") + "/seqtrans_test_" + std::to_string(::getpid()) + "_" +
         std::to_string(counter++) + "_" + stem;
}

}  // namespace seqtrans::testing
