#include "text/prompt_tokenizer.h"

#include <sentencepiece_processor.h>

#include "core/error.h"
#include "text/special_pieces.h"
#include "text/unicode.h"

namespace seqtrans {
namespace {

constexpr std::string_view word_boundary = "\xE2\x96\x81";  // "▁", SentencePiece's space marker
constexpr std::string_view replacement_character = "\xEF\xBF\xBD";  // U+FFFD

// The byte of a byte-fallback piece "<0xNN>", or -1 for any other piece: recognized by its text, as the
// tokenizers library's ByteFallback decoder does.
int byte_of_piece(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece.back() != '>') return -1;
  int value = 0;
  for (const char digit : piece.substr(3, 2)) {
    value *= 16;
    if (digit >= '0' && digit <= '9') value += digit - '0';
    else if (digit >= 'a' && digit <= 'f') value += digit - 'a' + 10;
    else if (digit >= 'A' && digit <= 'F') value += digit - 'A' + 10;
    else return -1;
  }
  return value;
}

// Appends a run of byte-fallback bytes as tokenizers' ByteFallback does: their text when they form valid
// UTF-8, else one U+FFFD per byte (not Python's one per ill-formed subpart).
void flush_bytes(std::string& bytes, std::string& text) {
  if (to_valid_utf8(bytes) == bytes) {
    text += bytes;
  } else {
    for (size_t i = 0; i < bytes.size(); ++i) text += replacement_character;
  }
  bytes.clear();
}

bool starts_with_space(std::string_view text) {
  return !text.empty() && (text.front() == ' ' || text.substr(0, word_boundary.size()) == word_boundary);
}

}  // namespace

PromptTokenizer::PromptTokenizer(const TokenizerSpec& spec)
    : spm_(std::make_unique<sentencepiece::SentencePieceProcessor>()), special_ids_(spec.special_ids) {
  SEQTRANS_CHECK(spec.prompt.has_value(), "tokenizer: a prompt tokenizer needs the prompt framing");
  SEQTRANS_CHECK(!spec.target_spm.empty(), "tokenizer: the SentencePiece model is empty");
  SEQTRANS_CHECK(spec.target_vocab.empty(), "tokenizer: a decoder-only model uses SentencePiece's own ids");
  prompt_ = *spec.prompt;
  const auto status = spm_->LoadFromSerializedProto(spec.target_spm);
  SEQTRANS_CHECK(status.ok(), "tokenizer: cannot load the SentencePiece model: {}", status.ToString());
  const int32_t size = spm_->GetPieceSize();
  for (const auto& [id, name] : {std::pair{special_ids_.unk, "unk"}, std::pair{special_ids_.bos, "bos"},
                                 std::pair{special_ids_.eos, "eos"}}) {
    SEQTRANS_CHECK(id >= 0 && id < size, "tokenizer: {} id {} outside the vocabulary [0, {})", name, id, size);
    special_pieces_.emplace_back(spm_->IdToPiece(id), id);
  }
}

PromptTokenizer::~PromptTokenizer() = default;

std::vector<int32_t> PromptTokenizer::encode_source(std::string_view prompt,
                                                    const std::string& source_language) const {
  SEQTRANS_CHECK(source_language.empty(), "this model has no language codes: no source language can be given");
  std::vector<int32_t> ids;
  if (prompt_.add_bos) ids.push_back(special_ids_.bos);
  const std::vector<int32_t> text = encode_text(prompt);
  ids.insert(ids.end(), text.begin(), text.end());
  return ids;
}

std::vector<int32_t> PromptTokenizer::target_start(const std::string& target_language) const {
  SEQTRANS_CHECK(target_language.empty(), "this model has no language codes: no target language can be given");
  return {};
}

std::vector<int32_t> PromptTokenizer::encode_target_prefix(std::string_view text) const {
  if (is_blank(text)) return {};
  return encode_text(text);
}

std::vector<int32_t> PromptTokenizer::encode_text(std::string_view text) const {
  const std::string valid = to_valid_utf8(text);
  std::vector<int32_t> ids;
  bool at_start = true;
  for (const LinePart& part : split_at_special_pieces(valid, special_pieces_)) {
    encode_stretch(part.text, at_start, ids);
    if (part.special_id >= 0) ids.push_back(part.special_id);
    at_start = false;
  }
  return ids;
}

void PromptTokenizer::encode_stretch(std::string_view stretch, bool at_start, std::vector<int32_t>& ids) const {
  // tokenizers drops empty stretches before its pre-tokenizer: they get no "▁" either.
  if (stretch.empty()) return;
  const bool prefix = !starts_with_space(stretch) && (prompt_.space_prefix == PromptSpacePrefix::Always ||
                                                      (prompt_.space_prefix == PromptSpacePrefix::First && at_start));
  // The stored model escapes spaces as "▁" and adds nothing itself, so a leading space is the prefix.
  std::vector<int> stretch_ids;
  const auto status = spm_->Encode(prefix ? " " + std::string(stretch) : std::string(stretch), &stretch_ids);
  SEQTRANS_CHECK(status.ok(), "tokenizer: SentencePiece failed to encode a prompt: {}", status.ToString());
  ids.insert(ids.end(), stretch_ids.begin(), stretch_ids.end());
}

std::string PromptTokenizer::decode_target(const std::vector<int32_t>& ids) const {
  std::string text, bytes;
  for (int32_t id : ids) {
    SEQTRANS_CHECK(id >= 0 && id < spm_->GetPieceSize(), "tokenizer: id {} is outside the vocabulary [0, {})", id,
                   spm_->GetPieceSize());
    if (is_special(id)) continue;
    const std::string& piece = spm_->IdToPiece(id);
    const int byte = byte_of_piece(piece);
    if (byte >= 0) {
      bytes.push_back(static_cast<char>(byte));
      continue;
    }
    if (!bytes.empty()) flush_bytes(bytes, text);
    for (size_t at = 0; at < piece.size();) {
      if (piece.compare(at, word_boundary.size(), word_boundary) == 0) {
        text += ' ';
        at += word_boundary.size();
      } else {
        text += piece[at++];
      }
    }
  }
  if (!bytes.empty()) flush_bytes(bytes, text);
  // HF's Strip decoder takes back the one space the prefix added (add_prefix_space).
  if (prompt_.space_prefix != PromptSpacePrefix::Never && !text.empty() && text.front() == ' ') text.erase(0, 1);
  return text;
}

bool PromptTokenizer::truncate_source(std::vector<int32_t>& ids, size_t max_length) const {
  SEQTRANS_CHECK(max_length >= 1, "tokenizer: a prompt needs room for at least one token (max length {})",
                 max_length);
  if (ids.size() <= max_length) return false;
  ids.resize(max_length);
  return true;
}

void PromptTokenizer::check_languages(const Languages& languages) const {
  SEQTRANS_CHECK(languages.source.empty() && languages.target.empty(),
                 "this model has no language codes: leave out --source-lang and --target-lang");
}

bool PromptTokenizer::is_special(int32_t id) const {
  return id == special_ids_.unk || id == special_ids_.bos || id == special_ids_.eos;
}

}  // namespace seqtrans
