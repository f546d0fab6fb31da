#include "text/vocabulary.h"

#include <limits>

#include "core/error.h"

namespace seqtrans {

Vocabulary::Vocabulary(std::vector<std::string> pieces, int32_t unk_id)
    : pieces_(std::move(pieces)), unk_id_(unk_id) {
  SEQTRANS_CHECK(!pieces_.empty(), "vocabulary: no pieces");
  SEQTRANS_CHECK(pieces_.size() <= static_cast<size_t>(std::numeric_limits<int32_t>::max()),
                 "vocabulary: {} pieces do not fit 32-bit ids", pieces_.size());
  SEQTRANS_CHECK(contains(unk_id_), "vocabulary: unk id {} outside [0, {})", unk_id_, size());
  ids_.reserve(pieces_.size());
  for (int32_t id = 0; id < size(); ++id) {
    if (!pieces_[id].empty()) ids_.emplace(pieces_[id], id);  // emplace keeps the first (lowest) id
  }
}

int32_t Vocabulary::to_id(const std::string& piece) const {
  const auto found = ids_.find(piece);
  return found == ids_.end() ? unk_id_ : found->second;
}

const std::string& Vocabulary::to_piece(int32_t id) const {
  SEQTRANS_CHECK(contains(id), "vocabulary: id {} outside [0, {})", id, size());
  return pieces_[id];
}

}  // namespace seqtrans
