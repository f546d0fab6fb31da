#include "text/tokenizer.h"

#include "text/multilingual_tokenizer.h"
#include "text/prompt_tokenizer.h"
#include "text/sentencepiece_tokenizer.h"

namespace seqtrans {

std::unique_ptr<Tokenizer> make_tokenizer(const TokenizerSpec& spec) {
  if (spec.prompt) return std::make_unique<PromptTokenizer>(spec);
  if (spec.language_codes.empty()) return std::make_unique<SentencePieceTokenizer>(spec);
  return std::make_unique<MultilingualTokenizer>(spec);
}

}  // namespace seqtrans
