#include "text/sentencepiece_tokenizer.h"

#include <algorithm>

#include <sentencepiece_processor.h>

#include "core/error.h"
#include "text/special_pieces.h"

namespace seqtrans {
namespace {

constexpr std::string_view word_boundary = "\xE2\x96\x81";  // "▁", SentencePiece's space marker

std::shared_ptr<const sentencepiece::SentencePieceProcessor> load_spm(const std::string& serialized,
                                                                      const char* side) {
  SEQTRANS_CHECK(!serialized.empty(), "tokenizer: the {} SentencePiece model is empty", side);
  auto spm = std::make_unique<sentencepiece::SentencePieceProcessor>();
  const auto status = spm->LoadFromSerializedProto(serialized);
  SEQTRANS_CHECK(status.ok(), "tokenizer: cannot load the {} SentencePiece model: {}", side,
                 status.ToString());
  return spm;
}

// The explicit vocabulary when the model has one, else SentencePiece's own pieces in id order.
Vocabulary make_vocabulary(const std::vector<std::string>& pieces,
                           const sentencepiece::SentencePieceProcessor& spm, int32_t unk_id) {
  if (!pieces.empty()) return Vocabulary(pieces, unk_id);
  std::vector<std::string> spm_pieces(spm.GetPieceSize());
  for (int id = 0; id < spm.GetPieceSize(); ++id) spm_pieces[id] = spm.IdToPiece(id);
  return Vocabulary(std::move(spm_pieces), unk_id);
}

void check_special_ids(const SpecialIds& ids, const Vocabulary& vocab, const char* side) {
  SEQTRANS_CHECK(vocab.contains(ids.eos), "tokenizer: eos id {} outside the {} vocabulary [0, {})",
                 ids.eos, side, vocab.size());
  SEQTRANS_CHECK(vocab.contains(ids.unk), "tokenizer: unk id {} outside the {} vocabulary [0, {})",
                 ids.unk, side, vocab.size());
  SEQTRANS_CHECK(ids.pad < 0 || vocab.contains(ids.pad),
                 "tokenizer: pad id {} outside the {} vocabulary [0, {})", ids.pad, side, vocab.size());
}

// What the tokenizer feeds SentencePiece: valid UTF-8 with NUL turned into a space, so a stray NUL
// separates words instead of becoming an unknown piece.
std::string clean_source_text(std::string_view line) {
  std::string text = to_valid_utf8(line);
  std::replace(text.begin(), text.end(), '\0', ' ');
  return text;
}

// Length of the leading ">>xx<<" language code of `text`, or 0; MarianTokenizer.remove_language_code.
size_t language_code_length(std::string_view text) {
  if (text.substr(0, 2) != ">>") return 0;
  const size_t end = text.find("<<");
  return end == std::string_view::npos ? 0 : end + 2;
}

void replace_all(std::string& text, std::string_view from, std::string_view to) {
  for (size_t at = text.find(from); at != std::string::npos; at = text.find(from, at + to.size())) {
    text.replace(at, from.size(), to);
  }
}

}  // namespace

SentencePieceTokenizer::SentencePieceTokenizer(const TokenizerSpec& spec)
    : source_spm_(load_spm(spec.source_spm, "source")),
      target_spm_(spec.target_spm == spec.source_spm ? source_spm_ : load_spm(spec.target_spm, "target")),
      source_vocab_(make_vocabulary(spec.source_vocab, *source_spm_, spec.special_ids.unk)),
      target_vocab_(make_vocabulary(spec.target_vocab, *target_spm_, spec.special_ids.unk)),
      special_ids_(spec.special_ids) {
  check_special_ids(special_ids_, source_vocab_, "source");
  check_special_ids(special_ids_, target_vocab_, "target");
  for (int32_t id : {special_ids_.eos, special_ids_.unk, special_ids_.pad}) {
    if (id < 0) continue;
    const std::string& piece = source_vocab_.to_piece(id);
    if (!piece.empty()) source_special_pieces_.emplace_back(piece, id);
  }
}

SentencePieceTokenizer::~SentencePieceTokenizer() = default;
SentencePieceTokenizer::SentencePieceTokenizer(SentencePieceTokenizer&&) noexcept = default;
SentencePieceTokenizer& SentencePieceTokenizer::operator=(SentencePieceTokenizer&&) noexcept = default;

std::vector<int32_t> SentencePieceTokenizer::encode_source(std::string_view line,
                                                           const std::string& source_language) const {
  SEQTRANS_CHECK(source_language.empty(), "this model has no language codes: no source language can be given");
  return encode_source(line);
}

std::vector<int32_t> SentencePieceTokenizer::target_start(const std::string& target_language) const {
  SEQTRANS_CHECK(target_language.empty(), "this model has no language codes: no target language can be given");
  return {};
}

void SentencePieceTokenizer::check_languages(const Languages& languages) const {
  SEQTRANS_CHECK(languages.source.empty() && languages.target.empty(),
                 "this model translates one language pair and has no language codes: leave out --source-lang and "
                 "--target-lang");
}

std::vector<int32_t> SentencePieceTokenizer::encode_source(std::string_view line) const {
  std::vector<int32_t> ids;
  const std::string text = clean_source_text(line);
  if (!is_blank(text)) {
    for (const LinePart& part : split_at_special_pieces(text, source_special_pieces_)) {
      encode_part(part.text, ids);
      if (part.special_id >= 0) ids.push_back(part.special_id);
    }
  }
  ids.push_back(special_ids_.eos);
  return ids;
}

void SentencePieceTokenizer::encode_part(std::string_view part, std::vector<int32_t>& ids) const {
  const size_t code_length = language_code_length(part);
  if (code_length > 0) {
    ids.push_back(source_vocab_.to_id(std::string(part.substr(0, code_length))));
    part.remove_prefix(code_length);
  }
  if (part.empty()) return;
  std::vector<std::string> pieces;
  const auto status = source_spm_->Encode(std::string(part), &pieces);
  SEQTRANS_CHECK(status.ok(), "tokenizer: SentencePiece failed to encode a line: {}", status.ToString());
  for (const std::string& piece : pieces) ids.push_back(source_vocab_.to_id(piece));
}

std::vector<int32_t> SentencePieceTokenizer::encode_target_prefix(std::string_view text) const {
  std::vector<int32_t> ids;
  const std::string cleaned = clean_source_text(text);
  if (is_blank(cleaned)) return ids;
  std::vector<std::string> pieces;
  const auto status = target_spm_->Encode(cleaned, &pieces);
  SEQTRANS_CHECK(status.ok(), "tokenizer: SentencePiece failed to encode a target prefix: {}", status.ToString());
  for (const std::string& piece : pieces) ids.push_back(target_vocab_.to_id(piece));
  return ids;
}

std::string SentencePieceTokenizer::decode_target(const std::vector<int32_t>& ids) const {
  std::vector<std::string> pieces;
  pieces.reserve(ids.size());
  for (int32_t id : ids) {
    const std::string& piece = target_vocab_.to_piece(id);  // checks the range first
    if (!is_special(id)) pieces.push_back(piece);
  }
  std::string text;
  const auto status = target_spm_->Decode(pieces, &text);
  SEQTRANS_CHECK(status.ok(), "tokenizer: SentencePiece failed to decode: {}", status.ToString());
  // Pieces the SentencePiece model does not know come back verbatim, "▁" included; HF turns those into
  // spaces too.
  replace_all(text, word_boundary, " ");
  return std::string(strip_whitespace(text));
}

bool SentencePieceTokenizer::truncate_source(std::vector<int32_t>& ids, size_t max_length) const {
  SEQTRANS_CHECK(max_length >= 1, "tokenizer: a source needs room for at least EOS (max length {})",
                 max_length);
  if (ids.size() <= max_length) return false;
  ids.resize(max_length);
  ids.back() = special_ids_.eos;
  return true;
}

bool SentencePieceTokenizer::is_special(int32_t id) const {
  return id == special_ids_.eos || id == special_ids_.unk || (special_ids_.pad >= 0 && id == special_ids_.pad);
}

}  // namespace seqtrans
