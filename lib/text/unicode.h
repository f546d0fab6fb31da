// UTF-8 helpers for untrusted input lines: repair invalid bytes, find blank lines, strip whitespace.
#pragma once

#include <string>
#include <string_view>

namespace seqtrans {

// Returns `bytes` with every ill-formed UTF-8 sequence replaced by U+FFFD, one replacement per maximal
// ill-formed subpart (the Unicode-recommended policy, identical to Python's
// `bytes.decode("utf-8", errors="replace")`), so a line behaves as it would for a Python user.
std::string to_valid_utf8(std::string_view bytes);

// True when the line holds nothing but whitespace (ASCII whitespace, NUL, and the Unicode space
// characters that SentencePiece's nmt_nfkc normalization folds to a space). Such a line has no content
// to translate: the tokenizer encodes it as just [eos] and the translator emits an empty line for it.
bool is_blank(std::string_view line);

// `text` without leading and trailing whitespace as Python's str.strip() defines it (str.isspace()),
// which is what Hugging Face applies to decoded text. Bytes that are not valid UTF-8 are never stripped.
std::string_view strip_whitespace(std::string_view text);

}  // namespace seqtrans
