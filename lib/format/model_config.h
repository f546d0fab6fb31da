// The architecture of a Transformer (encoder-decoder, or decoder-only), as read from a model file.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ops/op_types.h"

namespace seqtrans {

struct StackConfig {
  int num_layers = 0;
  int num_heads = 0;  // query heads
  int ffn_dim = 0;
  bool pre_norm = false;
  bool final_layer_norm = false;
  bool embedding_layer_norm = false;
  // Grouped-query attention's key/value heads; 0 (every encoder-decoder family) means num_heads.
  int num_kv_heads = 0;
  // Channels per head; 0 (every encoder-decoder family) means d_model / num_heads.
  int head_dim = 0;
};

// How every norm of a model normalizes (proto NormKind): layer norm (gamma, beta) or RMS norm (gamma only,
// computed in fp32 as HF's LlamaRMSNorm).
enum class NormKind { LayerNorm, RmsNorm };

// Which engine model runs a file (models/model_factory.h).
enum class ModelKind { EncoderDecoder, DecoderOnly };

// A decoder-only config has no encoder (its StackConfig stays empty) and no source side (source_vocab_size 0).
struct ModelConfig {
  ModelKind kind = ModelKind::EncoderDecoder;
  int d_model = 0;
  StackConfig encoder;
  StackConfig decoder;
  Activation activation = Activation::Swish;  // of the gate when gated_ffn
  float layer_norm_epsilon = 1e-5f;           // of every norm, layer or RMS
  NormKind norm = NormKind::LayerNorm;
  // Absolute positions added to the embeddings. A file with rotary positions (rope_theta set) adds none and
  // leaves this at its default.
  PositionEncoding position_encoding = PositionEncoding::SinusoidalSplit;
  // Set exactly when positions are rotary (decoder-only files): the base of HF's default RoPE, rotating channel
  // pairs (i, i + head_dim / 2) of each query and key head by position * rope_theta^(-2i / head_dim).
  std::optional<float> rope_theta;
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
  // Feed-forward as down(activation(gate x) * up x) (SwiGLU): tensor ffn/inner holds [gate; up], [2 ffn_dim, d].
  bool gated_ffn = false;
  // Whether the attention (qkv, output) and feed-forward (inner, outer) projections have bias tensors.
  bool attention_bias = true;
  bool ffn_bias = true;
  // Decoder-only models: the beginning-of-sequence id (a prompt's first token when the tokenizer adds it).
  int32_t bos_id = 0;
};

// A stack's key/value heads and channels per head, resolving StackConfig's 0 defaults.
inline int key_value_heads(const StackConfig& stack) {
  return stack.num_kv_heads > 0 ? stack.num_kv_heads : stack.num_heads;
}
inline int head_width(const ModelConfig& config, const StackConfig& stack) {
  return stack.head_dim > 0 ? stack.head_dim : config.d_model / stack.num_heads;
}

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

// Where a decoder-only tokenizer puts SentencePiece's "▁" before a stretch of prompt text (proto SpacePrefix,
// HF's Metaspace prepend_scheme).
enum class SpacePrefix { First, Always, Never };

// How a decoder-only model's tokenizer frames a prompt (proto TokenizerConfig.add_bos, space_prefix).
struct PromptFraming {
  bool add_bos = true;
  SpacePrefix space_prefix = SpacePrefix::First;
};

struct TokenizerConfig {
  std::string source_spm;  // serialized SentencePiece model; empty in a decoder-only file
  std::string target_spm;
  std::vector<std::string> source_vocab;  // empty: SentencePiece ids are the model ids
  std::vector<std::string> target_vocab;
  std::vector<LanguageCode> language_codes;  // empty: a single language pair
  LanguagePlacement source_language = LanguagePlacement::None;
  std::optional<PromptFraming> prompt;  // set exactly for decoder-only files
};

}  // namespace seqtrans
