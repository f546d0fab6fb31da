// PromptTokenizer: a decoder-only model's prompts -> ids and generated ids -> text, as Hugging Face's
// LlamaTokenizer (transformers 5, tokenizers backend) does for SentencePiece checkpoints (Llama-2, TinyLlama,
// Mistral):
//   encode: the literal text of <unk>, <s> or </s> becomes that id and cuts the prompt into stretches; a
//     stretch gets a leading "▁" as PromptSpec::space_prefix says (Metaspace: never when it is empty or
//     starts with a space), and SentencePiece's BPE with byte fallback turns it into ids, spaces as "▁" (the
//     converter stores the model with its normalizer cleared: HF applies none). BOS first when add_bos;
//     no EOS.
//   decode: unk, bos and eos are dropped (skip_special_tokens=True), "▁" becomes a space, each run of byte
//     pieces <0xNN> becomes its UTF-8 text or, when the run is not valid UTF-8, one U+FFFD per byte (the
//     tokenizers ByteFallback decoder), and one leading space is stripped unless the prefix is Never.
// Where we differ on purpose: invalid UTF-8 in a prompt is replaced by U+FFFD first (Python strings cannot
// hold it). Encoding and decoding are const and safe to call from several threads at once.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "text/tokenizer.h"

namespace sentencepiece {
class SentencePieceProcessor;
}

namespace seqtrans {

class PromptTokenizer : public Tokenizer {
 public:
  // spec.prompt must be set; spec.target_spm is the model, whose ids are the model's.
  explicit PromptTokenizer(const TokenizerSpec& spec);
  ~PromptTokenizer() override;

  // [BOS] ids of the prompt; never throws on bad text. No language may be given.
  std::vector<int32_t> encode_source(std::string_view prompt, const std::string& source_language) const override;
  // Nothing: generation continues the prompt.
  std::vector<int32_t> target_start(const std::string& target_language) const override;
  // The ids of a text the generation must start with, framed as a prompt of its own without BOS (HF's
  // tokenizer(text, add_special_tokens=False)); a blank text gives none.
  std::vector<int32_t> encode_target_prefix(std::string_view text) const override;
  std::string decode_target(const std::vector<int32_t>& ids) const override;
  // The first max_length ids (BOS included), as HF's truncation=True cuts a prompt on the right.
  bool truncate_source(std::vector<int32_t>& ids, size_t max_length) const override;
  void check_languages(const Languages& languages) const override;

 private:
  // Ids of `text` without BOS: its stretches between special pieces, each with its "▁" prefix.
  std::vector<int32_t> encode_text(std::string_view text) const;
  // Appends the ids of one stretch; `at_start`: it begins the text.
  void encode_stretch(std::string_view stretch, bool at_start, std::vector<int32_t>& ids) const;
  bool is_special(int32_t id) const;

  std::unique_ptr<sentencepiece::SentencePieceProcessor> spm_;
  SpecialIds special_ids_;
  PromptSpec prompt_;
  // The text of unk, bos and eos, with their ids: in a prompt, that text is the token.
  std::vector<std::pair<std::string, int32_t>> special_pieces_;
};

}  // namespace seqtrans
