// The tokenizer interface: how a model frames a source line and the start of its translation, and turns
// target ids back into text. The translator asks the tokenizer, not the model kind (docs/ARCHITECTURE.md).
// Implementations: SentencePieceTokenizer (Marian / OPUS-MT), MultilingualTokenizer (language codes:
// NLLB-200, M2M-100, mBART-50) and PromptTokenizer (decoder-only models: Llama-2, TinyLlama, Mistral).
// A decoder-only model's prompt is its "source": what the model reads before it generates; its generated
// ids are the "target". The interface fits both kinds as it is.
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace seqtrans {

// Ids with a fixed role, the same on both sides of a model (ModelConfig's eos_id, unk_id, pad_id).
struct SpecialIds {
  int32_t eos = -1;
  int32_t unk = -1;
  int32_t pad = -1;  // negative: the model has no pad token
  int32_t bos = -1;  // decoder-only models: the id a prompt starts with; negative: none
};

// A language code a multilingual model knows, and its token id in both vocabularies.
struct LanguageToken {
  std::string code;
  int32_t id = 0;
};

// Where a multilingual model puts a source line's language token.
enum class SourceLanguagePlacement { Prefix, Suffix };

// Where a decoder-only tokenizer puts SentencePiece's "▁" before a stretch of prompt text between special
// pieces: Hugging Face's Metaspace prepend_scheme "first" (legacy=false), "always" (legacy=true) and "never"
// (add_prefix_space=false). A stretch that is empty or starts with a space gets none.
enum class PromptSpacePrefix { First, Always, Never };

// How a decoder-only model's prompt is framed.
struct PromptSpec {
  bool add_bos = true;
  PromptSpacePrefix space_prefix = PromptSpacePrefix::First;
};

// What a Tokenizer is built from: the model file's TokenizerConfig plus the model's special ids.
struct TokenizerSpec {
  std::string source_spm;                 // serialized SentencePiece ModelProto
  std::string target_spm;                 // serialized SentencePiece ModelProto
  std::vector<std::string> source_vocab;  // [source_vocab_size] piece of each model id; empty: SentencePiece ids
  std::vector<std::string> target_vocab;  // [target_vocab_size] piece of each model id; empty: SentencePiece ids
  SpecialIds special_ids;
  std::vector<LanguageToken> language_codes;  // empty: one language pair (no codes)
  SourceLanguagePlacement source_language = SourceLanguagePlacement::Prefix;
  // Set for a decoder-only model, whose one SentencePiece model is target_spm (source_spm is empty).
  std::optional<PromptSpec> prompt;
};

// A line's source and target languages by code; both empty for a model of one language pair.
struct Languages {
  std::string source;
  std::string target;

  bool operator==(const Languages& other) const { return source == other.source && target == other.target; }
};

// Every method is const and safe to call from several threads at once.
class Tokenizer {
 public:
  virtual ~Tokenizer() = default;

  // [length] ids of one source line framed for its language: EOS, and the language token where the model
  // puts it. A blank line gives the frame alone. A decoder-only model's prompt: BOS first, no EOS. Never
  // throws on bad text (unknown languages are refused by check_languages first).
  virtual std::vector<int32_t> encode_source(std::string_view line, const std::string& source_language) const = 0;
  // The ids every translation into `target_language` starts with, as generated tokens (HF's
  // forced_bos_token_id): a multilingual model's language token; none for a model of one pair.
  virtual std::vector<int32_t> target_start(const std::string& target_language) const = 0;
  // [length] target ids of a text the translation must start with after target_start (a target prefix):
  // no EOS; a blank text gives none.
  virtual std::vector<int32_t> encode_target_prefix(std::string_view text) const = 0;
  // Text of target ids [length], special and language tokens dropped; throws seqtrans::Error for an id
  // outside the target vocabulary.
  virtual std::string decode_target(const std::vector<int32_t>& ids) const = 0;
  // Caps framed source ids [length] at max_length tokens the way HF's truncation=True does (the frame is
  // kept); returns whether tokens were dropped. max_length must leave room for the frame.
  virtual bool truncate_source(std::vector<int32_t>& ids, size_t max_length) const = 0;
  // Throws one line unless `languages` suit the model: both given and known for a multilingual model (the
  // line lists a few codes and how to list all), neither for a model of one pair.
  virtual void check_languages(const Languages& languages) const = 0;
};

// The tokenizer `spec` describes: a PromptTokenizer for a decoder-only model (spec.prompt), a
// MultilingualTokenizer when it has language codes, else a SentencePieceTokenizer.
std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec);

}  // namespace seqtrans
