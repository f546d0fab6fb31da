// Tests for Batcher: length sorting, token budget, sentence cap, oversize sentences.
#include "batching/batch_builder.h"

#include <algorithm>
#include <random>
#include <vector>

#include "catch.h"
#include "core/error.h"

namespace seqtrans {
namespace {

std::vector<SentenceLength> with_lengths(const std::vector<size_t>& lengths) {
  std::vector<SentenceLength> sentences;
  for (size_t k = 0; k < lengths.size(); ++k) sentences.push_back({k, lengths[k]});
  return sentences;
}

std::vector<size_t> sizes_of(const std::vector<Batch>& batches) {
  std::vector<size_t> sizes;
  for (const Batch& batch : batches) sizes.push_back(batch.indices.size());
  return sizes;
}

}  // namespace

TEST_CASE("Batcher respects the token budget and the sentence cap", "[batching]") {
  BatchingOptions options;
  options.max_batch_tokens = 500;
  options.max_batch_size = 16;
  const Batcher batcher(options);
  std::minstd_rand generator(3);
  std::vector<size_t> lengths;
  for (int k = 0; k < 1000; ++k) lengths.push_back(1 + generator() % (k % 50 == 0 ? 900 : 80));
  const std::vector<Batch> batches = batcher.make_batches(with_lengths(lengths));

  std::vector<int> seen(lengths.size(), 0);
  size_t previous_length = SIZE_MAX;
  for (size_t b = 0; b < batches.size(); ++b) {
    const Batch& batch = batches[b];
    REQUIRE(!batch.indices.empty());
    CHECK(batch.indices.size() <= options.max_batch_size);
    CHECK((batch.indices.size() == 1 || batch.indices.size() * batch.max_length <= options.max_batch_tokens));
    CHECK(batch.max_length == lengths[batch.indices.front()]);
    for (size_t index : batch.indices) {
      ++seen[index];
      CHECK(lengths[index] <= previous_length);  // longest first, across and within batches
      previous_length = lengths[index];
    }
    // Greedy: a batch closes only when the next sentence would break a limit.
    if (b + 1 < batches.size()) {
      const bool cap_reached = batch.indices.size() == options.max_batch_size;
      const bool budget_reached = (batch.indices.size() + 1) * batch.max_length > options.max_batch_tokens;
      CHECK((cap_reached || budget_reached));
    }
  }
  CHECK(std::all_of(seen.begin(), seen.end(), [](int count) { return count == 1; }));
}

TEST_CASE("Batcher caps the number of sentences", "[batching]") {
  BatchingOptions options;
  options.max_batch_tokens = 1000000;
  options.max_batch_size = 8;
  const std::vector<Batch> batches = Batcher(options).make_batches(with_lengths(std::vector<size_t>(100, 3)));
  CHECK(sizes_of(batches) == std::vector<size_t>{8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 4});
}

TEST_CASE("Batcher gives a sentence longer than the budget its own batch", "[batching]") {
  BatchingOptions options;
  options.max_batch_tokens = 100;
  options.max_batch_size = 64;
  const std::vector<Batch> batches = Batcher(options).make_batches(with_lengths({10, 5000, 10, 150, 10}));
  REQUIRE(batches.size() == 3);
  CHECK(batches[0].indices == std::vector<size_t>{1});
  CHECK(batches[0].max_length == 5000);
  CHECK(batches[1].indices == std::vector<size_t>{3});
  CHECK(batches[2].indices == std::vector<size_t>{0, 2, 4});
  CHECK(batches[2].max_length == 10);
}

TEST_CASE("Batcher sorts stably: equal lengths keep input order", "[batching]") {
  const std::vector<Batch> batches =
      Batcher(BatchingOptions{}).make_batches({{7, 4}, {3, 9}, {5, 4}, {1, 9}, {0, 4}});
  REQUIRE(batches.size() == 1);
  CHECK(batches[0].indices == std::vector<size_t>{3, 1, 7, 5, 0});
  CHECK(batches[0].max_length == 9);
}

TEST_CASE("Batcher: budget counts padding to the longest sentence", "[batching]") {
  BatchingOptions options;
  options.max_batch_tokens = 30;
  // 10 + 1 + 1 real tokens, but 3 x 10 padded: exactly the budget; a 4th would make 40.
  const std::vector<Batch> batches = Batcher(options).make_batches(with_lengths({10, 1, 1, 1}));
  CHECK(sizes_of(batches) == std::vector<size_t>{3, 1});
}

TEST_CASE("Batcher: no sentences, no batches; zero settings are rejected", "[batching]") {
  CHECK(Batcher(BatchingOptions{}).make_batches({}).empty());
  BatchingOptions options;
  options.max_batch_tokens = 0;
  CHECK_THROWS_AS(Batcher(options), Error);
  options = BatchingOptions{};
  options.max_batch_size = 0;
  CHECK_THROWS_AS(Batcher(options), Error);
  options = BatchingOptions{};
  options.read_ahead = 0;
  CHECK_THROWS_AS(validate(options), Error);
}

}  // namespace seqtrans
