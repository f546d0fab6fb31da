// Tests for OutputReorderer, and for the whole window -> batches -> outputs round trip keeping order.
#include "batching/output_order.h"

#include <string>
#include <vector>

#include "batching/batch_builder.h"
#include "catch.h"
#include "core/error.h"

namespace seqtrans {

TEST_CASE("OutputReorderer returns outputs in input order", "[batching]") {
  OutputReorderer reorderer(4);
  reorderer.set(2, "c");
  reorderer.set(0, "a");
  CHECK_FALSE(reorderer.complete());
  reorderer.set(3, "d");
  reorderer.set(1, "b");
  CHECK(reorderer.complete());
  CHECK(reorderer.take() == std::vector<std::string>{"a", "b", "c", "d"});
  // Ready for the next window of the same size.
  CHECK_FALSE(reorderer.complete());
  for (size_t k = 0; k < 4; ++k) reorderer.set(k, std::to_string(k));
  CHECK(reorderer.take() == std::vector<std::string>{"0", "1", "2", "3"});
}

TEST_CASE("OutputReorderer rejects missing, repeated and out-of-range lines", "[batching]") {
  OutputReorderer reorderer(3);
  reorderer.set(0, "a");
  CHECK_THROWS_AS(reorderer.set(0, "again"), Error);
  CHECK_THROWS_AS(reorderer.set(3, "outside"), Error);
  reorderer.set(2, "c");
  CHECK_THROWS_AS(reorderer.take(), Error);
  CHECK(OutputReorderer(0).take().empty());
}

TEST_CASE("Length-sorted batches come back in input order", "[batching]") {
  // A window of "sentences" whose length is their text length; the fake translation upper-cases them.
  const std::vector<std::string> window = {"ccc", "a", "", "eeeee", "bb", "dddd", "a", "ffffff"};
  std::vector<SentenceLength> sentences;
  for (size_t k = 0; k < window.size(); ++k) {
    if (!window[k].empty()) sentences.push_back({k, window[k].size()});  // blank lines are not batched
  }
  BatchingOptions options;
  options.max_batch_tokens = 12;
  options.max_batch_size = 3;
  OutputReorderer reorderer(window.size());
  reorderer.set(2, "");
  for (const Batch& batch : Batcher(options).make_batches(sentences)) {
    for (size_t index : batch.indices) {
      std::string output = window[index];
      for (char& c : output) c = static_cast<char>(c - 'a' + 'A');
      reorderer.set(index, output);
    }
  }
  CHECK(reorderer.take() == std::vector<std::string>{"CCC", "A", "", "EEEEE", "BB", "DDDD", "A", "FFFFFF"});
}

}  // namespace seqtrans
