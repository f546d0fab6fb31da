// Tokenizer: source text -> model ids and target ids -> text, as Hugging Face's MarianTokenizer does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/unicode.h"
#include "text/vocabulary.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace seqtrans {

// Ids with a fixed role, the same on both sides of a model (ModelConfig's eos_id, unk_id, pad_id).
struct SpecialIds {
  int32_t eos = -1;
  int32_t unk = -1;
  int32_t pad = -1;  // negative: the model has no pad token
};

// What a Tokenizer is built from: the model file's TokenizerConfig plus the model's special ids.
struct TokenizerSpec {
  std::string source_spm;                 // serialized SentencePiece ModelProto
  std::string target_spm;                 // serialized SentencePiece ModelProto
  std::vector<std::string> source_vocab;  // [source_vocab_size] piece of each model id; empty: SentencePiece ids
  std::vector<std::string> target_vocab;  // [target_vocab_size] piece of each model id; empty: SentencePiece ids
  SpecialIds special_ids;
};

// Turns source lines into model ids and target ids back into text with the model's SentencePiece
// models and vocabularies. Mirrors transformers' MarianTokenizer (5.x):
//   encode: the literal text of a special piece ("</s>", "<unk>", "<pad>") becomes that special id and
//     splits the line; a ">>xx<<" language code at the start of a part is one piece looked up in the
//     vocabulary; the rest goes through SentencePiece; pieces the vocabulary lacks become unk; EOS last.
//     No Moses punctuation normalization (MarianTokenizer defines it but never calls it).
//   decode: eos, pad and unk ids are dropped (skip_special_tokens=True), the pieces are joined by
//     SentencePiece, "▁" becomes a space and surrounding whitespace is stripped.
// Where we differ on purpose, or where Python cannot follow:
//   - invalid UTF-8 is replaced by U+FFFD first (Python strings cannot hold it; same policy as
//     bytes.decode(errors="replace"));
//   - NUL is treated as a space (HF passes it to SentencePiece, which makes it an unknown piece);
//   - a blank line (is_blank) is [eos] whatever the SentencePiece model's whitespace settings are;
//   - decoding uses the target SentencePiece model; HF uses the source one when the vocabulary is
//     shared, which only matters for byte-fallback pieces or denormalization rules (OPUS-MT has neither).
// Encoding and decoding are const and safe to call from several threads at once.
class Tokenizer {
 public:
  explicit Tokenizer(const TokenizerSpec& spec);
  ~Tokenizer();
  Tokenizer(Tokenizer&&) noexcept;
  Tokenizer& operator=(Tokenizer&&) noexcept;

  // [length] ids of one source line, EOS last; a blank line gives [eos]. Never throws on bad text.
  std::vector<int32_t> encode_source(std::string_view line) const;
  // [length] target ids of a text the translation must start with (a target prefix): the target
  // SentencePiece model and vocabulary, the source's text cleaning, no EOS; a blank text gives none.
  std::vector<int32_t> encode_target_prefix(std::string_view text) const;
  // Text of target ids [length]; throws seqtrans::Error for an id outside the target vocabulary.
  std::string decode_target(const std::vector<int32_t>& ids) const;

  // Caps source ids [length] at max_length tokens the way HF's truncation=True does: the first
  // max_length - 1 tokens, then EOS. Returns whether tokens were dropped. max_length must be >= 1.
  bool truncate_source(std::vector<int32_t>& ids, size_t max_length) const;

  const Vocabulary& source_vocabulary() const { return source_vocab_; }
  const Vocabulary& target_vocabulary() const { return target_vocab_; }
  const SpecialIds& special_ids() const { return special_ids_; }

 private:
  // One piece of text that is not split further: a special piece found in the line, or the text between.
  void encode_part(std::string_view part, std::vector<int32_t>& ids) const;
  bool is_special(int32_t id) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> source_spm_;
  std::unique_ptr<sentencepiece::SentencePieceProcessor> target_spm_;
  Vocabulary source_vocab_;
  Vocabulary target_vocab_;
  SpecialIds special_ids_;
  // Source pieces of eos, unk and pad, with their ids: their literal text in a line is that token.
  std::vector<std::pair<std::string, int32_t>> source_special_pieces_;
};

}  // namespace seqtrans
