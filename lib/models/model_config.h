// The architecture of an encoder-decoder Transformer, as read from a model file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/ops.h"

namespace seqtrans {

struct StackConfig {
  int num_layers = 0;
  int num_heads = 0;
  int ffn_dim = 0;
  bool pre_norm = false;
  bool final_layer_norm = false;
  bool embedding_layer_norm = false;
};

// Which engine model runs a file (models/model_factory.h).
enum class ModelKind { EncoderDecoder, DecoderOnly };

struct ModelConfig {
  ModelKind kind = ModelKind::EncoderDecoder;
  int d_model = 0;
  StackConfig encoder;
  StackConfig decoder;
  Activation activation = Activation::Swish;
  float layer_norm_epsilon = 1e-5f;
  PositionEncoding position_encoding = PositionEncoding::SinusoidalSplit;
  int max_positions = 0;
  // Added to every position before its encoding is looked up (mBART's learned table, M2M-100's sinusoids: 2).
  int position_offset = 0;
  float embedding_scale = 1.0f;
  bool shared_embeddings = true;
  bool tied_output = true;
  int source_vocab_size = 0;
  int target_vocab_size = 0;
  int32_t pad_id = 0;
  int32_t eos_id = 0;
  int32_t unk_id = 0;
  int32_t decoder_start_id = 0;
  bool output_bias = false;
  std::vector<int32_t> suppressed_ids;
};

// Decoding defaults the checkpoint records (proto GenerationDefaults); each is empty when the checkpoint
// has none. Command-line options override them; search never reads them directly.
struct GenerationDefaults {
  std::optional<int> max_length;              // HF max_length: counts the decoder start token
  std::optional<int> num_beams;               // HF num_beams
  std::optional<int32_t> forced_eos_token_id;  // HF forced_eos_token_id; equals ModelConfig::eos_id
};

// Multilingual models: a language code the user names and its token id (in both vocabularies).
struct LanguageCode {
  std::string code;
  int32_t id = 0;
};

// Where a source line's language token goes (proto LanguagePlacement).
enum class LanguagePlacement { None, SourcePrefix, SourceSuffix };

struct TokenizerConfig {
  std::string source_spm;  // serialized SentencePiece model
  std::string target_spm;
  std::vector<std::string> source_vocab;  // empty: SentencePiece ids are the model ids
  std::vector<std::string> target_vocab;
  std::vector<LanguageCode> language_codes;  // empty: a single language pair
  LanguagePlacement source_language = LanguagePlacement::None;
};

}  // namespace seqtrans
