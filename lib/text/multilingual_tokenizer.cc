#include "text/multilingual_tokenizer.h"

#include <algorithm>

#include "core/error.h"

namespace seqtrans {
namespace {

// How many codes a refusal lists before pointing at the full list.
constexpr size_t kCodesNamed = 6;

}  // namespace

MultilingualTokenizer::MultilingualTokenizer(const TokenizerSpec& spec)
    : text_(spec), placement_(spec.source_language), eos_(spec.special_ids.eos) {
  SEQTRANS_CHECK(!spec.language_codes.empty(), "tokenizer: a multilingual tokenizer needs language codes");
  for (const LanguageToken& language : spec.language_codes) {
    language_ids_.emplace(language.code, language.id);
    codes_in_order_.push_back(language.code);
    language_token_ids_.push_back(language.id);
  }
  std::sort(language_token_ids_.begin(), language_token_ids_.end());
}

int32_t MultilingualTokenizer::language_id(const std::string& code, const char* side) const {
  const auto found = language_ids_.find(code);
  if (found != language_ids_.end()) return found->second;
  std::string examples;
  for (size_t i = 0; i < std::min(kCodesNamed, codes_in_order_.size()); ++i)
    examples += (i > 0 ? ", " : "") + codes_in_order_[i];
  const std::string what = code.empty() ? fmt::format("this multilingual model needs --{}-lang", side)
                                        : fmt::format("--{}-lang '{}' is not a language of this model", side, code);
  throw Error(fmt::format("{} (its {} codes include {}; scripts/inspect_model.py --languages MODEL lists them all)",
                          what, codes_in_order_.size(), examples));
}

void MultilingualTokenizer::check_languages(const Languages& languages) const {
  language_id(languages.source, "source");
  language_id(languages.target, "target");
}

std::vector<int32_t> MultilingualTokenizer::encode_source(std::string_view line,
                                                          const std::string& source_language) const {
  const int32_t language = language_id(source_language, "source");
  std::vector<int32_t> ids = text_.encode_source(line);  // tokens, EOS
  if (placement_ == SourceLanguagePlacement::Prefix)
    ids.insert(ids.begin(), language);
  else
    ids.push_back(language);
  return ids;
}

std::vector<int32_t> MultilingualTokenizer::target_start(const std::string& target_language) const {
  return {language_id(target_language, "target")};
}

std::vector<int32_t> MultilingualTokenizer::encode_target_prefix(std::string_view text) const {
  return text_.encode_target_prefix(text);
}

std::string MultilingualTokenizer::decode_target(const std::vector<int32_t>& ids) const {
  std::vector<int32_t> text_ids;
  text_ids.reserve(ids.size());
  for (int32_t id : ids)
    if (!std::binary_search(language_token_ids_.begin(), language_token_ids_.end(), id)) text_ids.push_back(id);
  return text_.decode_target(text_ids);
}

bool MultilingualTokenizer::truncate_source(std::vector<int32_t>& ids, size_t max_length) const {
  SEQTRANS_CHECK(max_length >= 2, "tokenizer: a source needs room for its language token and EOS (max length {})",
                 max_length);
  if (ids.size() <= max_length) return false;
  // Prefix: [code] t1 .. tn [eos] -> [code] t1 .. t(max-2) [eos]; suffix: t1 .. tn [eos] [code] likewise.
  const int32_t language = placement_ == SourceLanguagePlacement::Prefix ? ids.front() : ids.back();
  std::vector<int32_t> text(ids.begin() + (placement_ == SourceLanguagePlacement::Prefix ? 1 : 0),
                            ids.end() - (placement_ == SourceLanguagePlacement::Prefix ? 1 : 2));
  text.resize(max_length - 2);
  ids.clear();
  if (placement_ == SourceLanguagePlacement::Prefix) ids.push_back(language);
  ids.insert(ids.end(), text.begin(), text.end());
  ids.push_back(eos_);
  if (placement_ == SourceLanguagePlacement::Suffix) ids.push_back(language);
  return true;
}

}  // namespace seqtrans
