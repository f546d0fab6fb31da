// MultilingualTokenizer: a SentencePieceTokenizer plus language codes, as Hugging Face's NllbTokenizer,
// M2M100Tokenizer and MBart50Tokenizer frame text (transformers 5): a source line is [code] tokens [eos]
// (or tokens [eos] [code], NLLB's legacy placement), and the target language's token is the first token
// generated (forced_bos_token_id). Language tokens are dropped when decoding, as skip_special_tokens does.
#pragma once

#include <map>

#include "text/sentencepiece_tokenizer.h"

namespace seqtrans {

class MultilingualTokenizer : public Tokenizer {
 public:
  explicit MultilingualTokenizer(const TokenizerSpec& spec);

  std::vector<int32_t> encode_source(std::string_view line, const std::string& source_language) const override;
  std::vector<int32_t> target_start(const std::string& target_language) const override;
  std::vector<int32_t> encode_target_prefix(std::string_view text) const override;
  std::string decode_target(const std::vector<int32_t>& ids) const override;
  // Keeps the language token and EOS, and the first text tokens that fit beside them.
  bool truncate_source(std::vector<int32_t>& ids, size_t max_length) const override;
  void check_languages(const Languages& languages) const override;

 private:
  // The id of a known code; throws one line listing a few codes otherwise.
  int32_t language_id(const std::string& code, const char* side) const;

  SentencePieceTokenizer text_;
  std::map<std::string, int32_t> language_ids_;
  std::vector<std::string> codes_in_order_;  // as the model file lists them (for messages)
  std::vector<int32_t> language_token_ids_;  // sorted
  SourceLanguagePlacement placement_;
  int32_t eos_;
};

}  // namespace seqtrans
