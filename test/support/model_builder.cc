#include "support/model_builder.h"

#include <unistd.h>

#include <atomic>
#include <cstring>
#include <fstream>
#include <cmath>
#include <cstdlib>
#include <random>

#include "core/error.h"

namespace seqtrans::testing {
namespace {

class TensorWriter {
 public:
  TensorWriter(ModelImage& image, uint32_t seed, float spread) : image_(image), rng_(seed), spread_(spread) {}

  void random(const std::string& name, std::vector<uint64_t> shape, float mean = 0.0f) {
    uint64_t count = 1;
    for (uint64_t extent : shape) count *= extent;
    std::normal_distribution<float> normal(mean, spread_);
    std::string bytes(count * sizeof(float), '\0');
    float* values = reinterpret_cast<float*>(bytes.data());
    for (uint64_t i = 0; i < count; ++i) values[i] = normal(rng_);
    add(name, shape, std::move(bytes));
  }

 private:
  void add(const std::string& name, const std::vector<uint64_t>& shape, std::string bytes) {
    proto::TensorEntry* entry = image_.header.add_tensors();
    entry->set_name(name);
    entry->set_dtype(proto::FP32);
    for (uint64_t extent : shape) entry->add_shape(extent);
    entry->set_size(bytes.size());
    image_.tensor_bytes.push_back(std::move(bytes));
  }

  ModelImage& image_;
  std::mt19937 rng_;
  float spread_;
};

void add_attention(TensorWriter& writer, const std::string& scope, uint64_t d, const char* fused, uint64_t parts) {
  writer.random(scope + "/" + fused + "/weight", {parts * d, d});
  writer.random(scope + "/" + fused + "/bias", {parts * d});
  writer.random(scope + "/output/weight", {d, d});
  writer.random(scope + "/output/bias", {d});
  writer.random(scope + "/norm/gamma", {d}, 1.0f);
  writer.random(scope + "/norm/beta", {d});
}

void add_ffn(TensorWriter& writer, const std::string& scope, uint64_t d, uint64_t f) {
  writer.random(scope + "/inner/weight", {f, d});
  writer.random(scope + "/inner/bias", {f});
  writer.random(scope + "/outer/weight", {d, f});
  writer.random(scope + "/outer/bias", {d});
  writer.random(scope + "/norm/gamma", {d}, 1.0f);
  writer.random(scope + "/norm/beta", {d});
}

}  // namespace

ModelImage make_tiny_model(const TinyModelShape& shape) {
  ModelImage image;
  proto::ModelHeader& header = image.header;
  header.set_format_version(1);
  header.set_description("random test model");
  proto::ModelConfig* config = header.mutable_config();
  config->set_d_model(shape.d_model);
  for (proto::StackConfig* stack : {config->mutable_encoder(), config->mutable_decoder()}) {
    stack->set_num_heads(shape.heads);
    stack->set_ffn_dim(shape.ffn);
  }
  config->mutable_encoder()->set_num_layers(shape.encoder_layers);
  config->mutable_decoder()->set_num_layers(shape.decoder_layers);
  config->set_activation(proto::SWISH);
  config->set_layer_norm_epsilon(1e-5f);
  config->set_position_encoding(proto::SINUSOIDAL_SPLIT);
  config->set_max_positions(shape.max_positions);
  config->set_embedding_scale(std::sqrt(static_cast<float>(shape.d_model)));
  config->set_shared_embeddings(true);
  config->set_tied_output(true);
  config->set_source_vocab_size(shape.vocab);
  config->set_target_vocab_size(shape.vocab);
  config->set_eos_id(0);
  config->set_unk_id(1);
  config->set_pad_id(shape.vocab - 1);
  config->set_decoder_start_id(shape.vocab - 1);
  config->set_output_bias(true);
  config->add_suppressed_ids(shape.vocab - 1);
  header.mutable_tokenizer()->set_source_spm("not a real sentencepiece model");
  header.mutable_tokenizer()->set_target_spm("not a real sentencepiece model");

  const uint64_t d = shape.d_model, f = shape.ffn;
  TensorWriter writer(image, shape.seed, shape.weight_spread);
  writer.random("shared/embedding", {static_cast<uint64_t>(shape.vocab), d});
  for (int i = 0; i < shape.encoder_layers; ++i) {
    const std::string scope = "encoder/layer_" + std::to_string(i);
    add_attention(writer, scope + "/self_attention", d, "qkv", 3);
    add_ffn(writer, scope + "/ffn", d, f);
  }
  for (int i = 0; i < shape.decoder_layers; ++i) {
    const std::string scope = "decoder/layer_" + std::to_string(i);
    add_attention(writer, scope + "/self_attention", d, "qkv", 3);
    add_attention(writer, scope + "/cross_attention", d, "kv", 2);
    writer.random(scope + "/cross_attention/query/weight", {d, d});
    writer.random(scope + "/cross_attention/query/bias", {d});
    add_ffn(writer, scope + "/ffn", d, f);
  }
  writer.random("decoder/output/bias", {static_cast<uint64_t>(shape.vocab)});
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
