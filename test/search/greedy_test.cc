// Greedy search on scripted distributions. Ids: 0 = EOS, 1..6 words, 7 = pad = start (suppressed).
#include "search/greedy.h"

#include <cmath>
#include <limits>

#include "catch.h"
#include "fake_step_model.h"
#include "hash_logits.h"
#include "scripted_logits.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

// The pad id is the most likely first token but suppressed, so greedy takes 1 (.3), then 2 (.6), then
// EOS (.7). Scores use log_softmax before masking: the first token scores log(.3), not log(.3 / .5).
ScriptedTable greedy_table() {
  return ScriptedTable({{0, 0.6}})
      .on({}, {{7, 0.5}, {1, 0.3}, {0, 0.1}})
      .on({1}, {{2, 0.6}, {0, 0.3}})
      .on({1, 2}, {{0, 0.7}});
}

FakeStepModel table_model(const ScriptedTable& table) {
  return FakeStepModel(
      kScriptVocab, kScriptEos, kScriptPad, {kScriptPad},
      [table](const std::vector<int32_t>&, const std::vector<int32_t>& prefix) { return table.logits(prefix); });
}

SearchOptions greedy_options(int max_length) {
  SearchOptions options;
  options.beam_size = 1;
  options.max_length_a = max_length;
  options.max_length_b = 0.0f;
  return options;
}

}  // namespace

TEST_CASE("greedy: argmax tokens, scores from log_softmax before masking", "[search][greedy]") {
  FakeStepModel model = table_model(greedy_table());
  const auto results = search(model, {{1, 0}}, greedy_options(10));
  REQUIRE(results.size() == 1);
  REQUIRE(results[0].hypotheses.size() == 1);
  const Hypothesis& hypothesis = results[0].hypotheses[0];
  CHECK(hypothesis.tokens == std::vector<int32_t>{1, 2});
  CHECK(hypothesis.score == Approx(std::log(0.3 * 0.6 * 0.7)).epsilon(1e-6));
  CHECK(hypothesis.finished);
  REQUIRE(model.steps.size() == 3);
  CHECK(model.steps[0][0].prefix == std::vector<int32_t>{kScriptPad});
  CHECK(model.steps[2][0].prefix == std::vector<int32_t>{kScriptPad, 1, 2});
  CHECK(model.encode_calls == 1);
}

TEST_CASE("greedy: cut at the maximum length without EOS", "[search][greedy]") {
  FakeStepModel model = table_model(greedy_table());
  const auto results = search(model, {{1, 0}}, greedy_options(2));
  const Hypothesis& hypothesis = results[0].hypotheses[0];
  CHECK(hypothesis.tokens == std::vector<int32_t>{1, 2});
  CHECK(hypothesis.score == Approx(std::log(0.3 * 0.6)).epsilon(1e-6));
  CHECK_FALSE(hypothesis.finished);
  CHECK(model.steps.size() == 2);
}

TEST_CASE("greedy: forced EOS at the maximum length", "[search][greedy]") {
  FakeStepModel model = table_model(greedy_table());
  SearchOptions options = greedy_options(2);
  options.force_eos_at_max_length = true;
  const auto results = search(model, {{1, 0}}, options);
  const Hypothesis& hypothesis = results[0].hypotheses[0];
  CHECK(hypothesis.tokens == std::vector<int32_t>{1});
  // The forced EOS adds 0, as in HF beam search (the processor runs after log_softmax).
  CHECK(hypothesis.score == Approx(std::log(0.3)).epsilon(1e-6));
  CHECK(hypothesis.finished);
}

TEST_CASE("greedy: finished sentences leave the batch", "[search][greedy]") {
  // Source 1 -> [1, 2] EOS (3 steps); source 2 -> EOS at once (1 step); source 3 -> [4] EOS (2 steps).
  const ScriptedTable long_table = greedy_table();
  const ScriptedTable empty_table({{0, 0.9}});
  const ScriptedTable short_table = ScriptedTable({{0, 0.8}}).on({}, {{4, 0.9}});
  FakeStepModel model(kScriptVocab, kScriptEos, kScriptPad, {kScriptPad},
                      [=](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
                        if (source[0] == 1) return long_table.logits(prefix);
                        return source[0] == 2 ? empty_table.logits(prefix) : short_table.logits(prefix);
                      });
  const auto results = search(model, {{1, 0}, {2, 0}, {3, 0}}, greedy_options(10));
  CHECK(results[0].hypotheses[0].tokens == std::vector<int32_t>{1, 2});
  CHECK(results[1].hypotheses[0].tokens.empty());
  CHECK(results[1].hypotheses[0].score == Approx(std::log(0.9)).epsilon(1e-6));
  CHECK(results[2].hypotheses[0].tokens == std::vector<int32_t>{4});

  REQUIRE(model.steps.size() == 3);
  CHECK(model.steps[0].size() == 3);
  REQUIRE(model.steps[1].size() == 2);
  CHECK(model.steps[1][0].sentence == 0);
  CHECK(model.steps[1][1].sentence == 2);
  CHECK(model.steps[1][1].prefix == std::vector<int32_t>{kScriptPad, 4});
  REQUIRE(model.steps[2].size() == 1);
  CHECK(model.steps[2][0].sentence == 0);
  // The last select releases the last sentence's row.
  CHECK(model.selects == std::vector<std::vector<int32_t>>{{0, 2}, {0}, {}});
}

TEST_CASE("greedy: per-sentence maximum lengths", "[search][greedy]") {
  // EOS is never likely; max_length_b = 0.5 gives limits 1, 2 and 3 for sources of 2, 4 and 6 ids.
  FakeStepModel model(10, 0, 9, {9}, [](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
    return hash_logits(source, prefix, 10, 2.0, 0, -20.0);
  });
  SearchOptions options = greedy_options(0);
  options.max_length_b = 0.5f;
  const auto results = search(model, {{1, 0}, {1, 2, 3, 0}, {1, 2, 3, 4, 5, 0}}, options);
  for (size_t sentence = 0; sentence < 3; ++sentence) {
    CHECK(results[sentence].hypotheses[0].tokens.size() == sentence + 1);
    CHECK_FALSE(results[sentence].hypotheses[0].finished);
  }
  REQUIRE(model.steps.size() == 3);
  CHECK(model.steps[0].size() == 3);
  CHECK(model.steps[1].size() == 2);
  CHECK(model.steps[2].size() == 1);
}

TEST_CASE("greedy: a batch gives the results of its sentences decoded one at a time", "[search][greedy]") {
  const auto logits = [](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
    return hash_logits(source, prefix, 10, 2.0, 0, 0.5);
  };
  const std::vector<std::vector<int32_t>> sources = {{1, 2, 0}, {3, 0}, {4, 4, 4, 4, 0}, {5, 6, 0}, {2, 0}};
  SearchOptions options = greedy_options(2);
  options.max_length_b = 1.5f;
  FakeStepModel batch_model(10, 0, 9, {9}, logits);
  const auto batch = search(batch_model, sources, options);
  for (size_t sentence = 0; sentence < sources.size(); ++sentence) {
    FakeStepModel single_model(10, 0, 9, {9}, logits);
    const auto single = search(single_model, {sources[sentence]}, options);
    CHECK(single[0].hypotheses[0].tokens == batch[sentence].hypotheses[0].tokens);
    CHECK(single[0].hypotheses[0].score == batch[sentence].hypotheses[0].score);
    CHECK(single[0].hypotheses[0].finished == batch[sentence].hypotheses[0].finished);
  }
}

TEST_CASE("greedy: a step without any possible token is an error", "[search][greedy]") {
  // Every id but the suppressed pad is -inf.
  FakeStepModel model(4, 0, 3, {3}, [](const std::vector<int32_t>&, const std::vector<int32_t>&) {
    const float minus_infinity = -std::numeric_limits<float>::infinity();
    return std::vector<float>{minus_infinity, minus_infinity, minus_infinity, 1.0f};
  });
  CHECK_THROWS_AS(search(model, {{1, 0}}, greedy_options(3)), Error);
}

TEST_CASE("search: an empty batch returns no results and encodes nothing", "[search]") {
  FakeStepModel model = table_model(greedy_table());
  CHECK(search(model, {}, greedy_options(3)).empty());
  CHECK(model.encode_calls == 0);
}

}  // namespace testing
}  // namespace seqtrans
