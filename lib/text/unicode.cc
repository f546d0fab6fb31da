#include "text/unicode.h"

#include <cstddef>
#include <cstdint>

namespace seqtrans {
namespace {

constexpr std::string_view replacement_character = "\xEF\xBF\xBD";  // U+FFFD

// Byte length a lead byte announces and the range its first continuation byte must lie in; the
// narrowed ranges exclude overlong forms, surrogates and code points above U+10FFFF (RFC 3629).
struct LeadByte {
  int continuation_count = -1;  // -1: not a valid lead byte
  uint8_t first_min = 0x80;
  uint8_t first_max = 0xBF;
};

LeadByte classify_lead_byte(uint8_t byte) {
  if (byte >= 0xC2 && byte <= 0xDF) return {1, 0x80, 0xBF};
  if (byte == 0xE0) return {2, 0xA0, 0xBF};
  if (byte == 0xED) return {2, 0x80, 0x9F};
  if (byte >= 0xE1 && byte <= 0xEF) return {2, 0x80, 0xBF};
  if (byte == 0xF0) return {3, 0x90, 0xBF};
  if (byte >= 0xF1 && byte <= 0xF3) return {3, 0x80, 0xBF};
  if (byte == 0xF4) return {3, 0x80, 0x8F};
  return {};
}

// Length of the longest prefix of `text[start..]` that can begin a well-formed multi-byte sequence,
// and whether that prefix is the complete sequence. `text[start]` must be >= 0x80.
struct SequenceScan {
  size_t length = 1;
  bool complete = false;
};

SequenceScan scan_sequence(std::string_view text, size_t start) {
  const LeadByte lead = classify_lead_byte(static_cast<uint8_t>(text[start]));
  SequenceScan scan;
  if (lead.continuation_count < 0) return scan;
  for (int k = 0; k < lead.continuation_count; ++k) {
    if (start + scan.length >= text.size()) return scan;
    const auto byte = static_cast<uint8_t>(text[start + scan.length]);
    const uint8_t min = k == 0 ? lead.first_min : 0x80;
    const uint8_t max = k == 0 ? lead.first_max : 0xBF;
    if (byte < min || byte > max) return scan;
    ++scan.length;
  }
  scan.complete = true;
  return scan;
}

// Decodes the well-formed sequence of `length` bytes at `text[start]`.
char32_t decode_sequence(std::string_view text, size_t start, size_t length) {
  const auto lead = static_cast<uint8_t>(text[start]);
  char32_t code_point = length == 1 ? lead : lead & (0x7F >> length);
  for (size_t k = 1; k < length; ++k) {
    code_point = (code_point << 6) | (static_cast<uint8_t>(text[start + k]) & 0x3F);
  }
  return code_point;
}

// Python's str.isspace() set.
bool is_python_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 ||
         c == 0x1680 || (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F ||
         c == 0x205F || c == 0x3000;
}

// Characters that leave no piece behind under nmt_nfkc (checked against SentencePiece): the Python
// whitespace set plus NUL, which the tokenizer turns into a space, less NEL (U+0085), which
// SentencePiece keeps as a character.
bool is_blank_character(char32_t c) { return c == 0 || (is_python_space(c) && c != 0x85); }

// Calls visit(code_point) for each well-formed character from the front until it returns false;
// returns the byte offset where it stopped. An ill-formed byte stops the walk.
template <typename Visit>
size_t walk_forward(std::string_view text, Visit visit) {
  size_t offset = 0;
  while (offset < text.size()) {
    const auto byte = static_cast<uint8_t>(text[offset]);
    size_t length = 1;
    if (byte >= 0x80) {
      const SequenceScan scan = scan_sequence(text, offset);
      if (!scan.complete) break;
      length = scan.length;
    }
    if (!visit(decode_sequence(text, offset, length))) break;
    offset += length;
  }
  return offset;
}

// Start of the well-formed character that ends at text[end - 1], or `end` when there is none.
size_t previous_character_start(std::string_view text, size_t end) {
  size_t start = end - 1;
  while (start > 0 && end - start < 4 && (static_cast<uint8_t>(text[start]) & 0xC0) == 0x80) --start;
  if (static_cast<uint8_t>(text[start]) < 0x80) return start;
  const SequenceScan scan = scan_sequence(text, start);
  return scan.complete && start + scan.length == end ? start : end;
}

}  // namespace

std::string to_valid_utf8(std::string_view bytes) {
  std::string valid;
  valid.reserve(bytes.size());
  size_t offset = 0;
  while (offset < bytes.size()) {
    if (static_cast<uint8_t>(bytes[offset]) < 0x80) {
      valid.push_back(bytes[offset]);
      ++offset;
      continue;
    }
    const SequenceScan scan = scan_sequence(bytes, offset);
    if (scan.complete) {
      valid.append(bytes.substr(offset, scan.length));
    } else {
      valid.append(replacement_character);
    }
    offset += scan.length;
  }
  return valid;
}

bool is_blank(std::string_view line) {
  return walk_forward(line, is_blank_character) == line.size();
}

std::string_view strip_whitespace(std::string_view text) {
  text.remove_prefix(walk_forward(text, is_python_space));
  size_t end = text.size();
  while (end > 0) {
    const size_t start = previous_character_start(text, end);
    if (start == end || !is_python_space(decode_sequence(text, start, end - start))) break;
    end = start;
  }
  return text.substr(0, end);
}

}  // namespace seqtrans
