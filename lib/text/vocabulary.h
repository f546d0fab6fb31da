// Vocabulary: the piece <-> id maps of one side (source or target) of a model.
#pragma once

#include <cstdint>
#include <string>
#include <unordered_map>
#include <vector>

namespace seqtrans {

// Piece <-> id maps for one side of a model. Ids are the model's embedding rows, which for OPUS-MT
// models (vocab.json) differ from SentencePiece's own ids; pieces the model does not know map to unk.
class Vocabulary {
 public:
  // pieces[i] is the piece whose id is i. An empty string marks an id without a piece (never looked up
  // by piece); when a piece repeats, lookups by piece return its lowest id.
  Vocabulary(std::vector<std::string> pieces, int32_t unk_id);

  int32_t size() const { return static_cast<int32_t>(pieces_.size()); }
  int32_t unk_id() const { return unk_id_; }
  bool contains(int32_t id) const { return id >= 0 && id < size(); }
  bool contains(const std::string& piece) const { return ids_.count(piece) != 0; }

  // The id of `piece`, or unk_id() when the model does not know it.
  int32_t to_id(const std::string& piece) const;
  // The piece of `id`; throws seqtrans::Error when the id is outside [0, size()).
  const std::string& to_piece(int32_t id) const;

 private:
  std::vector<std::string> pieces_;  // [size]
  std::unordered_map<std::string, int32_t> ids_;
  int32_t unk_id_;
};

}  // namespace seqtrans
