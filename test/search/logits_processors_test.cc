// The logits processors one at a time, on small rows.
#include "search/logits_processors.h"

#include <cmath>
#include <limits>
#include <vector>

#include "catch.h"
#include "fake_step_model.h"

namespace seqtrans {
namespace testing {
namespace {

const float kMinusInfinity = -std::numeric_limits<float>::infinity();

std::vector<float> applied(const LogitsProcessor& processor, std::vector<float> values, RowPosition position = {}) {
  processor.apply(ScoreRow{values.data(), static_cast<int64_t>(values.size())}, position);
  return values;
}

}  // namespace

TEST_CASE("LogSoftmax normalizes over the whole row", "[search][processors]") {
  const std::vector<float> out = applied(LogSoftmax(), {1.0f, 2.0f, 3.0f, kMinusInfinity});
  const double log_sum = std::log(std::exp(1.0) + std::exp(2.0) + std::exp(3.0));
  CHECK(out[0] == Approx(1.0 - log_sum).epsilon(1e-6));
  CHECK(out[2] == Approx(3.0 - log_sum).epsilon(1e-6));
  CHECK(out[3] == kMinusInfinity);
  // Large logits do not overflow.
  const std::vector<float> large = applied(LogSoftmax(), {1000.0f, 1000.0f});
  CHECK(large[0] == Approx(-std::log(2.0)).epsilon(1e-6));
}

TEST_CASE("SuppressIds sets ids to -inf and checks them", "[search][processors]") {
  const std::vector<float> out = applied(SuppressIds({1, 3}), {0.5f, 0.5f, 0.5f, 0.5f});
  CHECK(out == std::vector<float>{0.5f, kMinusInfinity, 0.5f, kMinusInfinity});
  CHECK_THROWS_AS(applied(SuppressIds({4}), {0.0f, 0.0f}), Error);
}

TEST_CASE("ForceEosAtMaxLength acts only at the last allowed step", "[search][processors]") {
  const ForceEosAtMaxLength force(/*eos_id=*/0);
  CHECK(applied(force, {-1.0f, -2.0f, -0.5f}, RowPosition{1, 3}) == std::vector<float>{-1.0f, -2.0f, -0.5f});
  CHECK(applied(force, {-1.0f, -2.0f, -0.5f}, RowPosition{2, 3}) ==
        std::vector<float>{0.0f, kMinusInfinity, kMinusInfinity});
}

TEST_CASE("Temperature divides the row", "[search][processors]") {
  CHECK(applied(Temperature(0.5f), {1.0f, -2.0f}) == std::vector<float>{2.0f, -4.0f});
  CHECK_THROWS_AS(Temperature(0.0f), Error);
}

TEST_CASE("TopKFilter keeps the k best and ties with the k-th", "[search][processors]") {
  CHECK(applied(TopKFilter(2), {1.0f, 4.0f, 3.0f, 2.0f}) ==
        std::vector<float>{kMinusInfinity, 4.0f, 3.0f, kMinusInfinity});
  // HF keeps every score >= the k-th largest, so ties can keep more than k.
  CHECK(applied(TopKFilter(1), {3.0f, 1.0f, 3.0f}) == std::vector<float>{3.0f, kMinusInfinity, 3.0f});
  CHECK(applied(TopKFilter(0), {1.0f, 2.0f}) == std::vector<float>{1.0f, 2.0f});
  CHECK(applied(TopKFilter(5), {1.0f, 2.0f}) == std::vector<float>{1.0f, 2.0f});
}

TEST_CASE("TopPFilter keeps the smallest nucleus with probability >= p", "[search][processors]") {
  // Probabilities .1, .2, .3, .4 (ids 0..3).
  const std::vector<float> logits = {std::log(0.1f), std::log(0.2f), std::log(0.3f), std::log(0.4f)};
  CHECK(applied(TopPFilter(0.7f), logits) == std::vector<float>{kMinusInfinity, kMinusInfinity, logits[2], logits[3]});
  CHECK(applied(TopPFilter(0.75f), logits) == std::vector<float>{kMinusInfinity, logits[1], logits[2], logits[3]});
  // At least one token always stays.
  CHECK(applied(TopPFilter(1e-6f), logits) ==
        std::vector<float>{kMinusInfinity, kMinusInfinity, kMinusInfinity, logits[3]});
  CHECK(applied(TopPFilter(1.0f), logits) == logits);
  // Among equal scores the kept one is the lowest id.
  CHECK(applied(TopPFilter(0.1f), {0.0f, 1.0f, 1.0f}) == std::vector<float>{kMinusInfinity, 1.0f, kMinusInfinity});
  CHECK_THROWS_AS(TopPFilter(0.0f), Error);
}

TEST_CASE("chains apply processors in order", "[search][processors]") {
  // The pad id 3 is suppressed after log_softmax, so it still takes its share of the normalization.
  FakeStepModel model(4, 0, 3, {3, 0}, [](const std::vector<int32_t>&, const std::vector<int32_t>&) {
    return std::vector<float>(4, 0.0f);
  });
  SearchOptions options;
  const LogitsProcessorChain log_probs = make_log_prob_chain(model, options);
  REQUIRE(log_probs.size() == 2);
  std::vector<float> row = {0.0f, 0.0f, 0.0f, 0.0f};
  log_probs.apply(ScoreRow{row.data(), 4}, RowPosition{0, 10});
  // EOS (0) is listed as suppressed but, as in HF's NoBadWordsLogitsProcessor, never masked.
  CHECK(row[0] == Approx(std::log(0.25)));
  CHECK(row[2] == Approx(std::log(0.25)));
  CHECK(row[3] == kMinusInfinity);

  options.force_eos_at_max_length = true;
  CHECK(make_mask_chain(model, options).size() == 2);
  options.sampling_topk = 0;
  CHECK(make_sampling_chain(options).size() == 0);
  options.sampling_topk = 3;
  options.sampling_topp = 0.5f;
  options.temperature = 0.7f;
  CHECK(make_sampling_chain(options).size() == 3);
}

}  // namespace testing
}  // namespace seqtrans
