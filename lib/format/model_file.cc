#include "format/model_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cmath>
#include <cstring>
#include <set>

#if __has_include(<google/protobuf/stubs/logging.h>)
#include <google/protobuf/stubs/logging.h>
#define SEQTRANS_PROTOBUF_LOG_HANDLER 1
#endif

#include "model.pb.h"

namespace seqtrans {
namespace {

// Read-only memory map of a whole file; unmapped when the last ModelFile copy goes away.
class MappedFile {
 public:
  explicit MappedFile(const std::string& path) {
    const int fd = ::open(path.c_str(), O_RDONLY);
    if (fd < 0) throw Error(fmt::format("model file '{}': cannot open: {}", path, std::strerror(errno)));
    struct stat info {};
    if (::fstat(fd, &info) != 0 || !S_ISREG(info.st_mode)) {
      ::close(fd);
      throw Error(fmt::format("model file '{}': not a regular file", path));
    }
    size_ = static_cast<size_t>(info.st_size);
    if (size_ > 0) {
      data_ = ::mmap(nullptr, size_, PROT_READ, MAP_PRIVATE, fd, 0);
      if (data_ == MAP_FAILED) {
        ::close(fd);
        throw Error(fmt::format("model file '{}': cannot map: {}", path, std::strerror(errno)));
      }
    }
    ::close(fd);
  }
  ~MappedFile() {
    if (data_ != nullptr && data_ != MAP_FAILED) ::munmap(data_, size_);
  }
  MappedFile(const MappedFile&) = delete;
  MappedFile& operator=(const MappedFile&) = delete;

  const char* data() const { return static_cast<const char*>(data_); }
  size_t size() const { return size_; }

 private:
  void* data_ = nullptr;
  size_t size_ = 0;
};

// Bounds that no real model reaches; they turn corrupt numbers into errors instead of huge allocations.
constexpr uint64_t kMaxWidth = 1 << 16;
constexpr uint64_t kMaxLayers = 1024;
constexpr uint64_t kMaxVocab = 1 << 24;
constexpr uint64_t kMaxPositions = 1 << 20;

class FileChecker {
 public:
  explicit FileChecker(const std::string& path) : path_(path) {}

  template <typename... Args>
  void require(bool condition, fmt::format_string<Args...> format, Args&&... args) const {
    if (!condition)
      throw Error(fmt::format("model file '{}': {}", path_, fmt::format(format, std::forward<Args>(args)...)));
  }

 private:
  const std::string& path_;
};

// A stack's shape; its heads must split `d_model` unless the file gives head_dim.
StackConfig read_stack(const proto::StackConfig& stack, const char* name, uint32_t d_model, const FileChecker& check) {
  check.require(stack.num_layers() >= 1 && stack.num_layers() <= kMaxLayers, "config.{}.num_layers = {} is invalid",
                name, stack.num_layers());
  check.require(stack.num_heads() >= 1 && stack.num_heads() <= 1024, "config.{}.num_heads = {} is invalid", name,
                stack.num_heads());
  check.require(stack.ffn_dim() >= 1 && stack.ffn_dim() <= kMaxWidth * 8, "config.{}.ffn_dim = {} is invalid", name,
                stack.ffn_dim());
  check.require(stack.num_kv_heads() <= stack.num_heads() &&
                    (stack.num_kv_heads() == 0 || stack.num_heads() % stack.num_kv_heads() == 0),
                "config.{}.num_kv_heads = {} does not divide num_heads = {}", name, stack.num_kv_heads(),
                stack.num_heads());
  check.require(stack.head_dim() <= kMaxWidth, "config.{}.head_dim = {} is invalid", name, stack.head_dim());
  check.require(stack.head_dim() > 0 || d_model % stack.num_heads() == 0,
                "config.d_model = {} is not divisible by {}.num_heads = {}", d_model, name, stack.num_heads());
  StackConfig out;
  out.num_layers = static_cast<int>(stack.num_layers());
  out.num_heads = static_cast<int>(stack.num_heads());
  out.ffn_dim = static_cast<int>(stack.ffn_dim());
  out.pre_norm = stack.pre_norm();
  out.final_layer_norm = stack.final_layer_norm();
  out.embedding_layer_norm = stack.embedding_layer_norm();
  out.num_kv_heads = static_cast<int>(stack.num_kv_heads());
  out.head_dim = static_cast<int>(stack.head_dim());
  return out;
}

ModelKind read_kind(const proto::ModelConfig& config, uint32_t format_version, const FileChecker& check) {
  switch (config.kind()) {
    case proto::MODEL_KIND_UNSPECIFIED:
      // Version 1 files predate the kind: all of them are encoder-decoder models. Later ones must say.
      check.require(format_version == 1, "config.kind is missing (format_version {} files must set it)",
                    format_version);
      return ModelKind::EncoderDecoder;
    case proto::ENCODER_DECODER: return ModelKind::EncoderDecoder;
    case proto::DECODER_ONLY:
      // The fields a decoder-only model needs (norm kind, rotary positions, ...) came with version 3.
      check.require(format_version >= 3, "config.kind = DECODER_ONLY needs format_version 3 or later, got {}",
                    format_version);
      return ModelKind::DecoderOnly;
    default: check.require(false, "config.kind = {} is not supported", static_cast<int>(config.kind()));
  }
  return ModelKind::EncoderDecoder;
}

// Absolute positions, or rotary ones (rope_theta), which no absolute encoding accompanies.
void read_positions(const proto::ModelConfig& config, ModelConfig& out, const FileChecker& check) {
  switch (config.position_encoding()) {
    case proto::SINUSOIDAL_SPLIT: out.position_encoding = PositionEncoding::SinusoidalSplit; break;
    case proto::LEARNED: out.position_encoding = PositionEncoding::Learned; break;
    case proto::SINUSOIDAL_FAIRSEQ: out.position_encoding = PositionEncoding::SinusoidalFairseq; break;
    case proto::ROTARY:
      check.require(std::isfinite(config.rope_theta()) && config.rope_theta() > 1.0f,
                    "config.rope_theta = {} is invalid (rotary positions need a base above 1)", config.rope_theta());
      out.rope_theta = config.rope_theta();
      break;
    default:
      check.require(false, "config.position_encoding = {} is not supported",
                    static_cast<int>(config.position_encoding()));
  }
  check.require(config.rope_theta() == 0.0f || out.rope_theta.has_value(),
                "config.rope_theta = {} is set, but config.position_encoding is not ROTARY", config.rope_theta());
  check.require(config.max_positions() >= 2 && config.max_positions() <= kMaxPositions,
                "config.max_positions = {} is invalid", config.max_positions());
  out.max_positions = static_cast<int>(config.max_positions());
  check.require(config.position_offset() <= 1024, "config.position_offset = {} is invalid", config.position_offset());
  out.position_offset = static_cast<int>(config.position_offset());
}

// The encoder-decoder model implements none of the choices format version 3 added for decoder-only models:
// a file that asks for one is refused here rather than run wrongly.
void check_encoder_decoder_choices(const ModelConfig& config, const FileChecker& check) {
  const auto require_unset = [&](bool unset, const char* what) {
    check.require(unset, "config.{} is supported in decoder-only files only", what);
  };
  require_unset(config.norm == NormKind::LayerNorm, "norm = RMS_NORM");
  require_unset(!config.rope_theta, "position_encoding = ROTARY");
  require_unset(!config.gated_ffn, "gated_ffn");
  require_unset(config.attention_bias, "no_attention_bias");
  require_unset(config.ffn_bias, "no_ffn_bias");
  for (const auto& [stack, name] : {std::pair{&config.encoder, "encoder"}, std::pair{&config.decoder, "decoder"}}) {
    check.require(stack->num_kv_heads == 0 && stack->head_dim == 0,
                  "config.{}.num_kv_heads and head_dim are supported in decoder-only files only", name);
  }
}

// Rotary positions turn channel pairs (i, i + head_dim / 2) of a head.
void check_decoder_only_shape(const ModelConfig& config, const FileChecker& check) {
  check.require(!config.rope_theta || head_width(config, config.decoder) % 2 == 0,
                "config.decoder.head_dim = {} is odd, but rotary positions turn channel pairs",
                head_width(config, config.decoder));
  check.require(!config.shared_embeddings, "config.shared_embeddings is set, but a decoder-only file has no source "
                                           "embedding to share with");
}

ModelConfig read_config(const proto::ModelConfig& config, uint32_t format_version, const FileChecker& check) {
  ModelConfig out;
  out.kind = read_kind(config, format_version, check);
  const bool decoder_only = out.kind == ModelKind::DecoderOnly;
  check.require(config.d_model() >= 1 && config.d_model() <= kMaxWidth, "config.d_model = {} is invalid",
                config.d_model());
  out.d_model = static_cast<int>(config.d_model());
  if (decoder_only)
    check.require(!config.has_encoder(), "config.encoder is set, but a decoder-only file has no encoder");
  else
    out.encoder = read_stack(config.encoder(), "encoder", config.d_model(), check);
  out.decoder = read_stack(config.decoder(), "decoder", config.d_model(), check);
  switch (config.activation()) {
    case proto::RELU: out.activation = Activation::Relu; break;
    case proto::GELU: out.activation = Activation::Gelu; break;
    case proto::GELU_TANH: out.activation = Activation::GeluTanh; break;
    case proto::SWISH: out.activation = Activation::Swish; break;
    default: check.require(false, "config.activation = {} is not supported", static_cast<int>(config.activation()));
  }
  check.require(config.layer_norm_epsilon() > 0.0f && config.layer_norm_epsilon() < 1.0f,
                "config.layer_norm_epsilon = {} is invalid", config.layer_norm_epsilon());
  out.layer_norm_epsilon = config.layer_norm_epsilon();
  switch (config.norm()) {
    case proto::NORM_KIND_UNSPECIFIED:  // files before version 3
    case proto::LAYER_NORM: out.norm = NormKind::LayerNorm; break;
    case proto::RMS_NORM: out.norm = NormKind::RmsNorm; break;
    default: check.require(false, "config.norm = {} is not supported", static_cast<int>(config.norm()));
  }
  read_positions(config, out, check);
  check.require(config.embedding_scale() > 0.0f, "config.embedding_scale = {} is invalid", config.embedding_scale());
  out.embedding_scale = config.embedding_scale();
  out.shared_embeddings = config.shared_embeddings();
  out.tied_output = config.tied_output();
  out.gated_ffn = config.gated_ffn();
  out.attention_bias = !config.no_attention_bias();
  out.ffn_bias = !config.no_ffn_bias();
  if (decoder_only) {
    check.require(config.source_vocab_size() == 0, "config.source_vocab_size = {} is set, but a decoder-only file "
                                                   "has no source vocabulary", config.source_vocab_size());
  } else {
    check.require(config.source_vocab_size() >= 2 && config.source_vocab_size() <= kMaxVocab,
                  "config.source_vocab_size = {} is invalid", config.source_vocab_size());
  }
  check.require(config.target_vocab_size() >= 2 && config.target_vocab_size() <= kMaxVocab,
                "config.target_vocab_size = {} is invalid", config.target_vocab_size());
  out.source_vocab_size = static_cast<int>(config.source_vocab_size());
  out.target_vocab_size = static_cast<int>(config.target_vocab_size());
  check.require(!out.shared_embeddings || out.source_vocab_size == out.target_vocab_size,
                "config.shared_embeddings needs equal vocab sizes, got {} and {}", out.source_vocab_size,
                out.target_vocab_size);
  const auto check_id = [&](uint32_t id, const char* field) {
    check.require(id < config.target_vocab_size(), "config.{} = {} is outside the target vocabulary of {}", field, id,
                  config.target_vocab_size());
    return static_cast<int32_t>(id);
  };
  out.pad_id = check_id(config.pad_id(), "pad_id");
  out.eos_id = check_id(config.eos_id(), "eos_id");
  out.unk_id = check_id(config.unk_id(), "unk_id");
  out.decoder_start_id = check_id(config.decoder_start_id(), "decoder_start_id");
  out.bos_id = check_id(config.bos_id(), "bos_id");
  check.require(decoder_only ||
                    (config.eos_id() < config.source_vocab_size() && config.unk_id() < config.source_vocab_size()),
                "config.eos_id/unk_id are outside the source vocabulary of {}", config.source_vocab_size());
  out.output_bias = config.output_bias();
  for (uint32_t id : config.suppressed_ids()) out.suppressed_ids.push_back(check_id(id, "suppressed_ids"));
  if (decoder_only)
    check_decoder_only_shape(out, check);
  else
    check_encoder_decoder_choices(out, check);
  return out;
}

// A decoder-only file's prompt framing; an encoder-decoder file must leave it unset.
std::optional<PromptFraming> read_prompt_framing(const proto::TokenizerConfig& tokenizer, const ModelConfig& config,
                                                 const FileChecker& check) {
  if (config.kind != ModelKind::DecoderOnly) {
    check.require(tokenizer.space_prefix() == proto::SPACE_PREFIX_UNSPECIFIED && !tokenizer.add_bos(),
                  "tokenizer.space_prefix and add_bos are for decoder-only files only");
    return std::nullopt;
  }
  PromptFraming framing;
  framing.add_bos = tokenizer.add_bos();
  switch (tokenizer.space_prefix()) {
    case proto::SPACE_PREFIX_FIRST: framing.space_prefix = SpacePrefix::First; break;
    case proto::SPACE_PREFIX_ALWAYS: framing.space_prefix = SpacePrefix::Always; break;
    case proto::SPACE_PREFIX_NEVER: framing.space_prefix = SpacePrefix::Never; break;
    default:
      check.require(false, "tokenizer.space_prefix = {} is not supported (a decoder-only file must set it)",
                    static_cast<int>(tokenizer.space_prefix()));
  }
  return framing;
}

TokenizerConfig read_tokenizer(const proto::TokenizerConfig& tokenizer, const ModelConfig& config,
                               const FileChecker& check) {
  if (config.kind == ModelKind::DecoderOnly) {
    // A prompt and its continuation share the decoder's one vocabulary: the target side.
    check.require(tokenizer.source_spm().empty() && tokenizer.source_vocab_size() == 0,
                  "tokenizer.source_spm/source_vocab are set, but a decoder-only file has no source side");
    check.require(tokenizer.language_codes_size() == 0, "tokenizer.language_codes are not supported in a "
                                                         "decoder-only file");
  } else {
    check.require(!tokenizer.source_spm().empty(), "tokenizer.source_spm is empty");
  }
  check.require(!tokenizer.target_spm().empty(), "tokenizer.target_spm is empty");
  check.require(tokenizer.source_vocab_size() == 0 || tokenizer.source_vocab_size() == config.source_vocab_size,
                "tokenizer.source_vocab has {} pieces but config.source_vocab_size is {}",
                tokenizer.source_vocab_size(), config.source_vocab_size);
  check.require(tokenizer.target_vocab_size() == 0 || tokenizer.target_vocab_size() == config.target_vocab_size,
                "tokenizer.target_vocab has {} pieces but config.target_vocab_size is {}",
                tokenizer.target_vocab_size(), config.target_vocab_size);
  TokenizerConfig out;
  out.source_spm = tokenizer.source_spm();
  out.target_spm = tokenizer.target_spm();
  out.source_vocab.assign(tokenizer.source_vocab().begin(), tokenizer.source_vocab().end());
  out.target_vocab.assign(tokenizer.target_vocab().begin(), tokenizer.target_vocab().end());
  std::set<std::string> codes;
  for (const proto::LanguageCode& language : tokenizer.language_codes()) {
    check.require(!language.code().empty() && printable(language.code()) == language.code(),
                  "tokenizer.language_codes has an empty or unprintable code");
    check.require(codes.insert(language.code()).second, "tokenizer.language_codes lists '{}' twice", language.code());
    check.require(language.id() < static_cast<uint32_t>(std::min(config.source_vocab_size, config.target_vocab_size)),
                  "tokenizer.language_codes: '{}' has id {}, outside the vocabularies", language.code(), language.id());
    out.language_codes.push_back(LanguageCode{language.code(), static_cast<int32_t>(language.id())});
  }
  switch (tokenizer.source_language()) {
    case proto::LANGUAGE_PLACEMENT_UNSPECIFIED: out.source_language = LanguagePlacement::None; break;
    case proto::SOURCE_PREFIX: out.source_language = LanguagePlacement::SourcePrefix; break;
    case proto::SOURCE_SUFFIX: out.source_language = LanguagePlacement::SourceSuffix; break;
    default:
      check.require(false, "tokenizer.source_language = {} is not supported",
                    static_cast<int>(tokenizer.source_language()));
  }
  check.require(out.language_codes.empty() == (out.source_language == LanguagePlacement::None),
                "tokenizer.language_codes and tokenizer.source_language must be given together");
  out.prompt = read_prompt_framing(tokenizer, config, check);
  return out;
}

GenerationDefaults read_generation(const proto::GenerationDefaults& generation, const ModelConfig& config,
                                   const FileChecker& check) {
  GenerationDefaults out;
  if (generation.has_max_length()) {
    // max_length counts the decoder start token, so 2 is the smallest that lets one token out.
    check.require(generation.max_length() >= 2 && generation.max_length() <= kMaxPositions,
                  "generation.max_length = {} is invalid (it counts the decoder start token, so at least 2)",
                  generation.max_length());
    out.max_length = static_cast<int>(generation.max_length());
  }
  if (generation.has_num_beams()) {
    check.require(generation.num_beams() >= 1 && generation.num_beams() <= 256,
                  "generation.num_beams = {} is invalid (1 to 256)", generation.num_beams());
    out.num_beams = static_cast<int>(generation.num_beams());
  }
  if (generation.has_forced_eos_token_id()) {
    // Search forces EOS only: a different forced token would need HF's "stop at the limit without EOS".
    check.require(static_cast<int64_t>(generation.forced_eos_token_id()) == config.eos_id,
                  "generation.forced_eos_token_id = {} differs from config.eos_id = {} (only EOS can be forced)",
                  generation.forced_eos_token_id(), config.eos_id);
    out.forced_eos_token_id = config.eos_id;
  }
  return out;
}

}  // namespace

ModelFile ModelFile::open(const std::string& path) {
  ModelFile model;
  model.path_ = path;
  const auto mapping = std::make_shared<MappedFile>(path);
  model.backing_ = mapping;
  model.parse(mapping->data(), mapping->size());
  return model;
}

ModelFile ModelFile::from_bytes(std::string name, std::string bytes) {
  ModelFile model;
  model.path_ = std::move(name);
  const auto held = std::make_shared<const std::string>(std::move(bytes));
  model.backing_ = held;
  model.parse(held->data(), held->size());
  return model;
}

void ModelFile::parse(const char* bytes, uint64_t file_size) {
  const FileChecker check(path_);

  check.require(file_size >= 16, "file is {} bytes, too short to be a seqtrans model", file_size);
  check.require(std::memcmp(bytes, kModelMagic, sizeof(kModelMagic)) == 0,
                "not a seqtrans model (wrong magic; convert checkpoints with scripts/convert_hf.py)");
  uint64_t header_size = 0;
  std::memcpy(&header_size, bytes + 8, sizeof(header_size));  // little-endian hosts only
  check.require(header_size <= file_size - 16, "header size {} exceeds the file size {} (truncated file?)",
                header_size, file_size);
  check.require(header_size < (uint64_t{1} << 31), "header size {} is beyond protobuf's limit", header_size);

  proto::ModelHeader header;
  // libprotobuf logs its own line (e.g. invalid UTF-8 in a string field) before failing; our one-line
  // error says what is wrong, so its log is silenced.
#ifdef SEQTRANS_PROTOBUF_LOG_HANDLER
  google::protobuf::SetLogHandler(nullptr);
#endif
  check.require(header.ParseFromArray(bytes + 16, static_cast<int>(header_size)), "header is corrupt (protobuf parse failed)");
  check.require(header.format_version() >= 1 && header.format_version() <= kModelFormatVersion,
                "format_version {} is not supported (this build reads 1 to {})", header.format_version(),
                kModelFormatVersion);
  check.require(header.has_config(), "config is missing");
  config_ = read_config(header.config(), header.format_version(), check);
  tokenizer_ = read_tokenizer(header.tokenizer(), config_, check);
  generation_ = read_generation(header.generation(), config_, check);
  description_ = header.description();

  const uint64_t data_start = (16 + header_size + kTensorAlignment - 1) / kTensorAlignment * kTensorAlignment;
  check.require(data_start <= file_size, "tensor data region starts past the end of the file (truncated file?)");
  const uint64_t data_size = file_size - data_start;
  for (const proto::TensorEntry& entry : header.tensors()) {
    const std::string& name = entry.name();
    check.require(!name.empty(), "a tensor entry has no name");
    // A name is quoted in the messages below: a corrupt one must not break them into several lines.
    check.require(printable(name) == name, "tensor '{}' has a control character in its name", printable(name));
    check.require(tensors_.count(name) == 0, "tensor '{}' appears twice", name);
    DataType dtype;
    switch (entry.dtype()) {
      case proto::FP32: dtype = DataType::F32; break;
      case proto::FP16: dtype = DataType::F16; break;
      default: check.require(false, "tensor '{}' has unsupported dtype {}", name, static_cast<int>(entry.dtype()));
    }
    Shape shape;
    uint64_t elements = 1;
    for (uint64_t extent : entry.shape()) {
      check.require(extent <= kMaxVocab * kMaxWidth && (extent == 0 || elements <= (uint64_t{1} << 40) / extent),
                    "tensor '{}' has an absurd shape", name);
      elements *= extent;
      shape.push_back(static_cast<int64_t>(extent));
    }
    check.require(entry.size() == elements * dtype_size(dtype), "tensor '{}' size {} does not match shape {} of {}",
                  name, entry.size(), shape_string(shape), dtype_name(dtype));
    check.require(entry.offset() % kTensorAlignment == 0, "tensor '{}' offset {} is not {}-byte aligned", name,
                  entry.offset(), kTensorAlignment);
    check.require(entry.offset() <= data_size && entry.size() <= data_size - entry.offset(),
                  "tensor '{}' extends past the end of the file (truncated file?)", name);
    void* data = const_cast<char*>(bytes + data_start + entry.offset());
    tensors_.emplace(name, Tensor::borrow(data, shape, dtype, Device::CPU));
  }
}

ModelFile ModelFile::from_parts(std::string name, ModelConfig config, TokenizerConfig tokenizer,
                                std::map<std::string, Tensor> tensors) {
  ModelFile model;
  model.path_ = std::move(name);
  model.config_ = std::move(config);
  model.tokenizer_ = std::move(tokenizer);
  model.tensors_ = std::move(tensors);
  return model;
}

const Tensor& ModelFile::tensor(const std::string& name, const Shape& expected) const {
  const auto found = tensors_.find(name);
  if (found == tensors_.end()) throw Error(fmt::format("model file '{}': tensor '{}' is missing", path_, name));
  if (found->second.shape() != expected)
    throw Error(fmt::format("model file '{}': tensor '{}' has shape {}, expected {}", path_, name,
                            shape_string(found->second.shape()), shape_string(expected)));
  return found->second;
}

}  // namespace seqtrans
