#include "text/special_pieces.h"

namespace seqtrans {

// Each piece's next occurrence is searched from where its last search ended, so the split stays linear in
// the line even when it is full of special pieces.
std::vector<LinePart> split_at_special_pieces(std::string_view text,
                                              const std::vector<std::pair<std::string, int32_t>>& special_pieces) {
  std::vector<size_t> next_at;
  for (const auto& special : special_pieces) next_at.push_back(text.find(special.first));
  std::vector<LinePart> parts;
  size_t cursor = 0;
  while (true) {
    size_t found_at = std::string_view::npos;
    const std::pair<std::string, int32_t>* found = nullptr;
    for (size_t k = 0; k < special_pieces.size(); ++k) {
      const std::string& piece = special_pieces[k].first;
      if (next_at[k] != std::string_view::npos && next_at[k] < cursor) next_at[k] = text.find(piece, cursor);
      if (next_at[k] == std::string_view::npos) continue;
      if (next_at[k] < found_at || (next_at[k] == found_at && piece.size() > found->first.size())) {
        found_at = next_at[k];
        found = &special_pieces[k];
      }
    }
    if (!found) {
      parts.push_back({text.substr(cursor), -1});
      return parts;
    }
    parts.push_back({text.substr(cursor, found_at - cursor), found->second});
    cursor = found_at + found->first.size();
  }
}

}  // namespace seqtrans
