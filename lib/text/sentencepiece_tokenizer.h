// SentencePieceTokenizer: source text -> model ids and target ids -> text through SentencePiece models and
// piece vocabularies, as Hugging Face's MarianTokenizer does.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "text/tokenizer.h"
#include "text/unicode.h"
#include "text/vocabulary.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace seqtrans {

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
// Encoding and decoding are const and safe to call from several threads at once. It knows no language
// codes (MultilingualTokenizer adds them): source_language and target_language must be empty.
class SentencePieceTokenizer : public Tokenizer {
 public:
  explicit SentencePieceTokenizer(const TokenizerSpec& spec);
  ~SentencePieceTokenizer() override;
  SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept;
  SentencePieceTokenizer& operator=(SentencePieceTokenizer&&) noexcept;

  // [length] ids of one source line, EOS last; a blank line gives [eos]. Never throws on bad text.
  std::vector<int32_t> encode_source(std::string_view line) const;
  std::vector<int32_t> encode_source(std::string_view line, const std::string& source_language) const override;
  std::vector<int32_t> target_start(const std::string& target_language) const override;
  std::vector<int32_t> encode_target_prefix(std::string_view text) const override;
  std::string decode_target(const std::vector<int32_t>& ids) const override;
  // The first max_length - 1 tokens, then EOS (HF's truncation=True).
  bool truncate_source(std::vector<int32_t>& ids, size_t max_length) const override;
  void check_languages(const Languages& languages) const override;

  const Vocabulary& source_vocabulary() const { return source_vocab_; }
  const Vocabulary& target_vocabulary() const { return target_vocab_; }
  const SpecialIds& special_ids() const { return special_ids_; }

 private:
  // One piece of text that is not split further: a special piece found in the line, or the text between.
  void encode_part(std::string_view part, std::vector<int32_t>& ids) const;
  bool is_special(int32_t id) const;

  // One processor for both sides where the model file stores the same SentencePiece model twice (a shared
  // vocabulary: the bundled Marian model, NLLB, M2M-100): a load builds the model's piece trie, 10-15 ms of
  // a one-line translate's start for 8,000 pieces.
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> source_spm_;
  std::shared_ptr<const sentencepiece::SentencePieceProcessor> target_spm_;
  Vocabulary source_vocab_;
  Vocabulary target_vocab_;
  SpecialIds special_ids_;
  // Source pieces of eos, unk and pad, with their ids: their literal text in a line is that token.
  std::vector<std::pair<std::string, int32_t>> source_special_pieces_;
};

}  // namespace seqtrans
