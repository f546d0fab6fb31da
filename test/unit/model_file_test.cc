// The model reader accepts a valid file and turns every kind of damage into one-line Errors.
#include <cstring>
#include <fstream>
#include <functional>
#include <iterator>
#include <set>

#include "catch.h"
#include "models/encoder_decoder_model.h"
#include "format/model_file.h"
#include "models/tensor_specs.h"
#include "support/model_builder.h"

using namespace seqtrans;
using namespace seqtrans::testing;

namespace {

std::string read_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream out(path, std::ios::binary);
  out.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// Opens `path` expecting failure; returns the message and checks it is one line naming the file.
std::string open_error(const std::string& path) {
  try {
    ModelFile::open(path);
  } catch (const Error& error) {
    const std::string message = error.what();
    CHECK(message.find(path) != std::string::npos);
    CHECK(message.find('\n') == std::string::npos);
    return message;
  }
  FAIL("opening " << path << " did not fail");
  return "";
}

std::string write_image(const ModelImage& image) {
  const std::string path = temp_path("model.seqtrans");
  write_model_file(path, image);
  return path;
}

std::string tensor_scope(const ModelImage& image, const std::string& name) {
  for (const auto& entry : image.header.tensors())
    if (entry.name() == name) return entry.name();
  return "";
}

}  // namespace

TEST_CASE("a valid model file opens and builds a model", "[model_file]") {
  const ModelImage image = make_tiny_model({});
  const std::string path = write_image(image);
  const ModelFile file = ModelFile::open(path);
  CHECK(file.config().d_model == 16);
  CHECK(file.config().decoder.num_layers == 2);
  CHECK(file.tensors().size() == static_cast<size_t>(image.header.tensors_size()));
  CHECK_NOTHROW(EncoderDecoderModel(file, {}));
}

TEST_CASE("missing, empty and foreign files are refused", "[model_file]") {
  CHECK(open_error("/nonexistent/model.seqtrans").find("cannot open") != std::string::npos);
  const std::string empty = temp_path("empty");
  write_bytes(empty, "");
  CHECK(open_error(empty).find("too short") != std::string::npos);
  const std::string foreign = temp_path("foreign");
  write_bytes(foreign, std::string("PK\3\4 this is a zip file, not a model"));
  CHECK(open_error(foreign).find("magic") != std::string::npos);
}

TEST_CASE("a file truncated anywhere is refused", "[model_file]") {
  const std::string bytes = read_bytes(write_image(make_tiny_model({})));
  const std::string path = temp_path("truncated");
  // The last tensor (the 23-float output bias) ends 36 bytes before the end: cut inside it too.
  for (size_t cut : {size_t{12}, size_t{40}, bytes.size() / 2, bytes.size() - 37}) {
    write_bytes(path, bytes.substr(0, cut));
    INFO("cut at " << cut);
    open_error(path);
  }
}

TEST_CASE("an absurd header size or corrupt header is refused", "[model_file]") {
  std::string bytes = read_bytes(write_image(make_tiny_model({})));
  const std::string path = temp_path("corrupt");
  std::string huge = bytes;
  const uint64_t absurd = ~uint64_t{0} - 7;
  std::memcpy(&huge[8], &absurd, 8);
  write_bytes(path, huge);
  CHECK(open_error(path).find("header size") != std::string::npos);
  std::string scrambled = bytes;
  for (size_t i = 16; i < 80; ++i) scrambled[i] = static_cast<char>(0xff);
  write_bytes(path, scrambled);
  open_error(path);
}

TEST_CASE("a tensor name with a control character is refused in one line", "[model_file]") {
  // Found by test/fuzz/model_file_fuzzer: names were quoted verbatim, a line feed included.
  ModelImage image = make_tiny_model({});
  image.header.mutable_tensors(0)->set_name("encoder/embed\nding\x1b[31m");
  const std::string message = open_error(write_image(image));
  CHECK(message.find("control character") != std::string::npos);
  CHECK(message.find("embed\\x0ading\\x1b[31m") != std::string::npos);
}

TEST_CASE("wrong shapes, missing tensors and absurd config values are refused", "[model_file]") {
  SECTION("a tensor with the wrong shape") {
    ModelImage image = make_tiny_model({});
    for (auto& entry : *image.header.mutable_tensors())
      if (entry.name() == "encoder/layer_1/ffn/inner/weight") {
        // Same byte count, transposed shape: only the shape check can catch it.
        entry.set_shape(0, 16);
        entry.set_shape(1, 32);
      }
    const ModelFile file = ModelFile::open(write_image(image));
    try {
      EncoderDecoderModel model(file, {});
      FAIL("a transposed weight was accepted");
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find("encoder/layer_1/ffn/inner/weight") != std::string::npos);
      CHECK(std::string(error.what()).find("expected [32, 16]") != std::string::npos);
    }
  }
  SECTION("a missing tensor") {
    ModelImage image = make_tiny_model({});
    auto* tensors = image.header.mutable_tensors();
    for (int i = 0; i < tensors->size(); ++i)
      if (tensors->Get(i).name() == "decoder/layer_0/cross_attention/kv/bias") {
        tensors->DeleteSubrange(i, 1);
        image.tensor_bytes.erase(image.tensor_bytes.begin() + i);
        break;
      }
    CHECK(tensor_scope(image, "decoder/layer_0/cross_attention/kv/bias").empty());
    const ModelFile file = ModelFile::open(write_image(image));
    try {
      EncoderDecoderModel model(file, {});
      FAIL("a model without a tensor was accepted");
    } catch (const Error& error) {
      CHECK(std::string(error.what()).find("decoder/layer_0/cross_attention/kv/bias' is missing") != std::string::npos);
    }
  }
  SECTION("a size that does not match the shape") {
    ModelImage image = make_tiny_model({});
    image.header.mutable_tensors(3)->set_size(4);
    CHECK(open_error(write_image(image)).find("does not match shape") != std::string::npos);
  }
  SECTION("an absurd tensor shape") {
    ModelImage image = make_tiny_model({});
    auto* entry = image.header.mutable_tensors(0);
    entry->set_shape(0, uint64_t{1} << 62);
    CHECK(open_error(write_image(image)).find("absurd shape") != std::string::npos);
  }
  SECTION("absurd config numbers") {
    ModelImage image = make_tiny_model({});
    image.header.mutable_config()->set_target_vocab_size(4000000000u);
    CHECK(open_error(write_image(image)).find("target_vocab_size") != std::string::npos);
    image = make_tiny_model({});
    image.header.mutable_config()->set_d_model(15);
    CHECK(open_error(write_image(image)).find("divisible") != std::string::npos);
    image = make_tiny_model({});
    image.header.mutable_config()->set_eos_id(23);
    CHECK(open_error(write_image(image)).find("eos_id") != std::string::npos);
    image = make_tiny_model({});
    image.header.set_format_version(kModelFormatVersion + 1);
    CHECK(open_error(write_image(image)).find("format_version") != std::string::npos);
  }
}

TEST_CASE("format versions: version 1 files are encoder-decoder models, later ones name their kind", "[model_file]") {
  ModelImage image = make_tiny_model({});
  REQUIRE(image.header.format_version() == 1);
  CHECK(ModelFile::open(write_image(image)).config().kind == ModelKind::EncoderDecoder);
  image.header.set_format_version(2);
  CHECK(open_error(write_image(image)).find("config.kind is missing") != std::string::npos);
  image.header.mutable_config()->set_kind(proto::ENCODER_DECODER);
  CHECK(ModelFile::open(write_image(image)).config().kind == ModelKind::EncoderDecoder);
  // Decoder-only files came with version 3: the fields they need did not exist before.
  ModelImage llama = make_tiny_llama_model({});
  CHECK(ModelFile::open(write_image(llama)).config().kind == ModelKind::DecoderOnly);
  llama.header.set_format_version(2);
  CHECK(open_error(write_image(llama)).find("DECODER_ONLY needs format_version 3") != std::string::npos);
}

TEST_CASE("a decoder-only (Llama) file's fields are read", "[model_file]") {
  TinyLlamaShape shape;
  shape.head_dim = 6;  // not d_model / heads, as HF's head_dim allows
  const ModelImage image = make_tiny_llama_model(shape);
  const ModelFile file = ModelFile::open(write_image(image));
  const ModelConfig& config = file.config();
  CHECK(config.kind == ModelKind::DecoderOnly);
  CHECK(config.norm == NormKind::RmsNorm);
  CHECK(config.rope_theta == 10000.0f);
  CHECK(config.gated_ffn);
  CHECK_FALSE(config.attention_bias);
  CHECK_FALSE(config.ffn_bias);
  CHECK_FALSE(config.tied_output);
  CHECK(config.bos_id == 1);
  CHECK(config.source_vocab_size == 0);
  CHECK(config.encoder.num_layers == 0);
  CHECK(config.decoder.num_kv_heads == 2);
  CHECK(key_value_heads(config.decoder) == 2);
  CHECK(head_width(config, config.decoder) == 6);
  REQUIRE(file.tokenizer().prompt.has_value());
  CHECK(file.tokenizer().prompt->add_bos);
  CHECK(file.tokenizer().prompt->space_prefix == SpacePrefix::First);
  // Fused projections: 4 query heads and 2 key and 2 value heads of 6 channels; gate and up rows.
  CHECK(file.tensor("decoder/layer_1/self_attention/qkv/weight", {(4 + 2 * 2) * 6, 16}).elements() > 0);
  CHECK(file.tensor("decoder/layer_1/self_attention/output/weight", {16, 4 * 6}).elements() > 0);
  CHECK(file.tensor("decoder/layer_0/ffn/inner/weight", {2 * 24, 16}).elements() > 0);
  CHECK(file.tensor("decoder/layer_0/ffn/outer/weight", {16, 24}).elements() > 0);
  CHECK(file.tensor("decoder/final_norm/gamma", {16}).elements() > 0);
  CHECK(file.tensor("decoder/output/weight", {23, 16}).elements() > 0);
  CHECK_FALSE(file.has_tensor("decoder/final_norm/beta"));
  CHECK_FALSE(file.has_tensor("decoder/layer_0/self_attention/qkv/bias"));
  CHECK_FALSE(file.has_tensor("decoder/layer_0/ffn/inner/bias"));
  CHECK_FALSE(file.has_tensor("shared/embedding"));
  CHECK(file.has_tensor("decoder/embedding"));
}

TEST_CASE("decoder-only tensor specs follow the bias, norm and tying flags", "[model_file]") {
  ModelConfig config = ModelFile::open(write_image(make_tiny_llama_model({}))).config();
  const auto names = [](const ModelConfig& of) {
    std::set<std::string> out;
    for (const TensorSpec& spec : model_tensor_specs(of)) out.insert(spec.name);
    return out;
  };
  CHECK(names(config).size() == 1 + 2 * 6 + 1 + 1);  // embedding, 6 per layer, final norm, output
  config.attention_bias = config.ffn_bias = true;
  config.norm = NormKind::LayerNorm;
  config.tied_output = true;
  const std::set<std::string> with_biases = names(config);
  CHECK(with_biases.count("decoder/layer_0/self_attention/qkv/bias") == 1);
  CHECK(with_biases.count("decoder/layer_0/self_attention/output/bias") == 1);
  CHECK(with_biases.count("decoder/layer_0/ffn/inner/bias") == 1);
  CHECK(with_biases.count("decoder/layer_0/ffn/outer/bias") == 1);
  CHECK(with_biases.count("decoder/final_norm/beta") == 1);
  CHECK(with_biases.count("decoder/output/weight") == 0);
  CHECK(with_biases.count("decoder/layer_0/cross_attention/query/weight") == 0);
}

TEST_CASE("inconsistent decoder-only files and decoder-only choices in encoder-decoder files are refused",
          "[model_file]") {
  const auto refused = [](const std::function<void(proto::ModelHeader&)>& damage, bool llama) {
    ModelImage image = llama ? make_tiny_llama_model({}) : make_tiny_model({});
    image.header.set_format_version(3);
    if (!llama) image.header.mutable_config()->set_kind(proto::ENCODER_DECODER);
    damage(image.header);
    return open_error(write_image(image));
  };
  SECTION("decoder-only") {
    CHECK(refused([](auto& h) { h.mutable_config()->mutable_encoder()->set_num_layers(2); }, true)
              .find("has no encoder") != std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_config()->set_source_vocab_size(23); }, true)
              .find("no source vocabulary") != std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_tokenizer()->set_source_spm("x"); }, true).find("no source side") !=
          std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_config()->set_rope_theta(0.5f); }, true).find("config.rope_theta = 0.5") !=
          std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_config()->set_position_encoding(proto::LEARNED); }, true)
              .find("not ROTARY") != std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_config()->mutable_decoder()->set_num_kv_heads(3); }, true)
              .find("num_kv_heads = 3") != std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_config()->mutable_decoder()->set_head_dim(5); }, true)
              .find("head_dim = 5 is odd") != std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_config()->set_bos_id(23); }, true).find("bos_id = 23") !=
          std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_tokenizer()->set_space_prefix(proto::SPACE_PREFIX_UNSPECIFIED); }, true)
              .find("tokenizer.space_prefix") != std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_config()->set_norm(static_cast<proto::NormKind>(7)); }, true)
              .find("config.norm = 7") != std::string::npos);
  }
  SECTION("encoder-decoder") {
    CHECK(refused([](auto& h) { h.mutable_config()->set_norm(proto::RMS_NORM); }, false)
              .find("norm = RMS_NORM is supported in decoder-only files only") != std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_config()->set_gated_ffn(true); }, false).find("gated_ffn") !=
          std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_config()->mutable_decoder()->set_num_kv_heads(1); }, false)
              .find("decoder.num_kv_heads") != std::string::npos);
    CHECK(refused(
              [](auto& h) {
                h.mutable_config()->set_position_encoding(proto::ROTARY);
                h.mutable_config()->set_rope_theta(10000.0f);
              },
              false)
              .find("ROTARY") != std::string::npos);
    CHECK(refused([](auto& h) { h.mutable_tokenizer()->set_space_prefix(proto::SPACE_PREFIX_FIRST); }, false)
              .find("decoder-only files only") != std::string::npos);
  }
}

TEST_CASE("language codes and position offsets are read and checked", "[model_file]") {
  ModelImage image = make_tiny_model({});
  image.header.mutable_config()->set_position_offset(2);
  proto::TokenizerConfig* tokenizer = image.header.mutable_tokenizer();
  proto::LanguageCode* english = tokenizer->add_language_codes();
  english->set_code("eng_Latn");
  english->set_id(5);
  proto::LanguageCode* german = tokenizer->add_language_codes();
  german->set_code("deu_Latn");
  german->set_id(6);
  tokenizer->set_source_language(proto::SOURCE_PREFIX);
  const ModelFile file = ModelFile::open(write_image(image));
  CHECK(file.config().position_offset == 2);
  REQUIRE(file.tokenizer().language_codes.size() == 2);
  CHECK(file.tokenizer().language_codes[1].code == "deu_Latn");
  CHECK(file.tokenizer().language_codes[1].id == 6);
  CHECK(file.tokenizer().source_language == LanguagePlacement::SourcePrefix);

  german->set_code("eng_Latn");
  CHECK(open_error(write_image(image)).find("lists 'eng_Latn' twice") != std::string::npos);
  german->set_code("deu_Latn");
  german->set_id(100000);
  CHECK(open_error(write_image(image)).find("outside the vocabularies") != std::string::npos);
  german->set_id(6);
  tokenizer->set_source_language(proto::LANGUAGE_PLACEMENT_UNSPECIFIED);
  CHECK(open_error(write_image(image)).find("must be given together") != std::string::npos);
}

TEST_CASE("generation defaults are read when present and checked", "[model_file]") {
  SECTION("absent: every default is empty") {
    const ModelFile file = ModelFile::open(write_image(make_tiny_model({})));
    CHECK_FALSE(file.generation_defaults().max_length.has_value());
    CHECK_FALSE(file.generation_defaults().num_beams.has_value());
    CHECK_FALSE(file.generation_defaults().forced_eos_token_id.has_value());
  }
  SECTION("present, zero included") {
    ModelImage image = make_tiny_model({});
    image.header.mutable_generation()->set_max_length(512);
    image.header.mutable_generation()->set_num_beams(6);
    image.header.mutable_generation()->set_forced_eos_token_id(image.header.config().eos_id());
    const ModelFile file = ModelFile::open(write_image(image));
    CHECK(file.generation_defaults().max_length == 512);
    CHECK(file.generation_defaults().num_beams == 6);
    CHECK(file.generation_defaults().forced_eos_token_id == static_cast<int32_t>(image.header.config().eos_id()));
  }
  SECTION("a forced token other than EOS is refused") {
    ModelImage image = make_tiny_model({});
    image.header.mutable_generation()->set_forced_eos_token_id(image.header.config().eos_id() + 1);
    CHECK(open_error(write_image(image)).find("forced_eos_token_id") != std::string::npos);
  }
  SECTION("a max_length that leaves no token and absurd beams are refused") {
    ModelImage image = make_tiny_model({});
    image.header.mutable_generation()->set_max_length(1);
    CHECK(open_error(write_image(image)).find("generation.max_length = 1") != std::string::npos);
    image.header.mutable_generation()->set_max_length(20);
    image.header.mutable_generation()->set_num_beams(0);
    CHECK(open_error(write_image(image)).find("generation.num_beams = 0") != std::string::npos);
  }
}
