// Cutting text at the literal text of special pieces ("</s>", "<unk>", ...), as Hugging Face's added-token
// trie does before a tokenizer model sees the text. Shared by the tokenizers of every model kind.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace seqtrans {

// A stretch of text up to (not including) a special piece, and that piece's id (-1 after the last).
struct LinePart {
  std::string_view text;
  int32_t special_id = -1;
};

// Cuts `text` at every occurrence of a special piece (piece text, id), leftmost first and the longest on a
// tie. The parts view `text`; the last part has special_id -1.
std::vector<LinePart> split_at_special_pieces(std::string_view text,
                                              const std::vector<std::pair<std::string, int32_t>>& special_pieces);

}  // namespace seqtrans
