// Tests for Vocabulary: piece <-> id maps built from an explicit id-ordered piece list.
#include "text/vocabulary.h"

#include "catch.h"
#include "core/error.h"

namespace seqtrans {

TEST_CASE("Vocabulary maps pieces to their index and unknown pieces to unk", "[text][vocabulary]") {
  const Vocabulary vocab({"</s>", "<unk>", "\xE2\x96\x81the", "s", "<pad>"}, /*unk_id=*/1);
  CHECK(vocab.size() == 5);
  CHECK(vocab.unk_id() == 1);
  CHECK(vocab.to_id("\xE2\x96\x81the") == 2);
  CHECK(vocab.to_id("<pad>") == 4);
  CHECK(vocab.to_id("zebra") == 1);
  CHECK(vocab.to_id("") == 1);
  CHECK(vocab.contains("s"));
  CHECK_FALSE(vocab.contains("zebra"));
  CHECK(vocab.to_piece(3) == "s");
  CHECK(vocab.contains(4));
  CHECK_FALSE(vocab.contains(5));
  CHECK_FALSE(vocab.contains(-1));
}

TEST_CASE("Vocabulary rejects ids outside its range", "[text][vocabulary]") {
  const Vocabulary vocab({"<unk>", "a"}, /*unk_id=*/0);
  CHECK_THROWS_AS(vocab.to_piece(2), Error);
  CHECK_THROWS_AS(vocab.to_piece(-1), Error);
  CHECK_THROWS_AS(Vocabulary({"a", "b"}, /*unk_id=*/2), Error);
  CHECK_THROWS_AS(Vocabulary({}, /*unk_id=*/0), Error);
}

TEST_CASE("Vocabulary: repeated pieces resolve to the lowest id, empty entries are holes", "[text][vocabulary]") {
  const Vocabulary vocab({"<unk>", "a", "", "a", "b"}, /*unk_id=*/0);
  CHECK(vocab.to_id("a") == 1);
  CHECK(vocab.to_piece(3) == "a");
  CHECK(vocab.to_piece(2).empty());
  CHECK(vocab.to_id("") == 0);
  CHECK(vocab.to_id("b") == 4);
}

}  // namespace seqtrans
