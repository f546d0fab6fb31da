// Beam search on scripted distributions whose beams are worked out by hand below (confirmed against
// Hugging Face by `hf_beam_crosscheck.py --scripted`). Ids: 0 = EOS, 1..6 words, 7 = pad = start
// (suppressed). Probabilities not listed in a row are shared evenly by the other ids.
#include "search/beam_search.h"

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

// Step 1: [1] .4, [2] .3, [EOS] .2 (rank 2: may not finish), then .02 ties.
// Step 2: [1,3] .36, [2,EOS] .15 (rank 1: finishes), [2,4] .135, [1,EOS] .02 (rank 3: dropped).
// Step 3: [1,3,EOS] .216 and [2,4,EOS] .1215 finish (ranks 0, 1); running [1,3,5] .108, [1,3,1] .006.
ScriptedTable rank_rule_table() {
  return ScriptedTable({{0, 0.5}})
      .on({}, {{1, 0.4}, {2, 0.3}, {0, 0.2}})
      .on({1}, {{0, 0.05}, {3, 0.9}})
      .on({2}, {{0, 0.5}, {4, 0.45}})
      .on({1, 3}, {{0, 0.6}, {5, 0.3}})
      .on({2, 4}, {{0, 0.9}});
}

// Step 1: [1] .6, [EOS] .35 finishes (rank 1): score log(.35) / 1.
// Step 2: [1,EOS] .3 finishes (rank 0): log(.3) / 2; two hypotheses finished. Running [1,3] .288, [1,1] .002.
// Step 3: [1,3,EOS] .1728 finishes: log(.1728) / 3; running [1,3,5] .10944, [1,3,1] .00096.
// Step 4 (max length 4): [1,3,5,EOS] .103968 finishes: log(.103968) / 4.
ScriptedTable stopping_table() {
  return ScriptedTable({{0, 0.5}})
      .on({}, {{1, 0.6}, {0, 0.35}})
      .on({1}, {{0, 0.5}, {3, 0.48}})
      .on({1, 3}, {{0, 0.6}, {5, 0.38}})
      .on({1, 3, 5}, {{0, 0.95}});
}

// Step 1: [1] .5, [2] .4, EOS ties the rest at .0167 (rank 2). Step 2 is the last allowed (max 2):
// [2,5] .36 and [1,3] .35 finish without EOS.
ScriptedTable max_length_table() {
  return ScriptedTable({{0, 0.01}}).on({}, {{1, 0.5}, {2, 0.4}}).on({1}, {{3, 0.7}, {4, 0.2}}).on({2}, {{5, 0.9}});
}

FakeStepModel scripted_model(const ScriptedTable& table) {
  return FakeStepModel(
      kScriptVocab, kScriptEos, kScriptPad, {kScriptPad},
      [table](const std::vector<int32_t>&, const std::vector<int32_t>& prefix) { return table.logits(prefix); });
}

SearchOptions beam_options(int beam_size, int num_hypotheses, float length_penalty, BeamStopping stopping,
                           int max_length) {
  SearchOptions options;
  options.beam_size = beam_size;
  options.num_hypotheses = num_hypotheses;
  options.length_penalty = length_penalty;
  options.beam_stopping = stopping;
  options.max_length_a = max_length;
  options.max_length_b = 0.0f;
  return options;
}

void check_hypothesis(const Hypothesis& hypothesis, const std::vector<int32_t>& tokens, double score, bool finished) {
  CHECK(hypothesis.tokens == tokens);
  CHECK(hypothesis.score == Approx(score).epsilon(1e-5));
  CHECK(hypothesis.finished == finished);
}

const std::vector<std::vector<int32_t>> kOneSource = {{1, 0}};

}  // namespace

TEST_CASE("beam search: length penalty orders the n-best", "[search][beam]") {
  FakeStepModel model = scripted_model(rank_rule_table());
  const auto results = search(model, kOneSource, beam_options(2, 2, 1.0f, BeamStopping::Heuristic, 10));
  REQUIRE(results.size() == 1);
  REQUIRE(results[0].hypotheses.size() == 2);
  // log(.216) / 3 = -0.5108 beats log(.1215) / 3 = -0.7025, which beats the shorter [2]: log(.15) / 2 = -0.9486.
  check_hypothesis(results[0].hypotheses[0], {1, 3}, std::log(0.4 * 0.9 * 0.6) / 3, true);
  check_hypothesis(results[0].hypotheses[1], {2, 4}, std::log(0.3 * 0.45 * 0.9) / 3, true);
  // After step 3 the best running beam, log(.108) / 3 = -0.742, cannot beat -0.7025: done after 3 steps.
  CHECK(model.steps.size() == 3);
}

TEST_CASE("beam search: an EOS ranked beam_size or lower never finishes", "[search][beam]") {
  FakeStepModel model = scripted_model(rank_rule_table());
  const auto results = search(model, kOneSource, beam_options(2, 2, 0.0f, BeamStopping::Heuristic, 10));
  REQUIRE(results[0].hypotheses.size() == 2);
  // Without length normalization the step-1 EOS (log .2 = -1.609, rank 2) would be second; HF drops it,
  // so [2] (log .15 = -1.897, finished at rank 1 of step 2) is second.
  check_hypothesis(results[0].hypotheses[0], {1, 3}, std::log(0.4 * 0.9 * 0.6), true);
  check_hypothesis(results[0].hypotheses[1], {2}, std::log(0.3 * 0.5), true);
}

TEST_CASE("beam search: num_hypotheses cuts the n-best", "[search][beam]") {
  FakeStepModel model = scripted_model(rank_rule_table());
  const auto results = search(model, kOneSource, beam_options(2, 1, 1.0f, BeamStopping::Heuristic, 10));
  REQUIRE(results[0].hypotheses.size() == 1);
  check_hypothesis(results[0].hypotheses[0], {1, 3}, std::log(0.4 * 0.9 * 0.6) / 3, true);
}

TEST_CASE("beam search: the first step expands one slot into the beam", "[search][beam]") {
  FakeStepModel model = scripted_model(rank_rule_table());
  search(model, kOneSource, beam_options(2, 2, 1.0f, BeamStopping::Heuristic, 10));
  REQUIRE(model.steps.size() == 3);
  CHECK(model.steps[0].size() == 1);
  CHECK(model.steps[0][0].prefix == std::vector<int32_t>{kScriptPad});
  // Step 2 keeps HF's beam order: [1] (score .4) in slot 0, [2] (.3) in slot 1; step 3 [1,3], [2,4].
  REQUIRE(model.steps[1].size() == 2);
  CHECK(model.steps[1][0].prefix == std::vector<int32_t>{kScriptPad, 1});
  CHECK(model.steps[1][1].prefix == std::vector<int32_t>{kScriptPad, 2});
  REQUIRE(model.steps[2].size() == 2);
  CHECK(model.steps[2][0].prefix == std::vector<int32_t>{kScriptPad, 1, 3});
  CHECK(model.steps[2][1].prefix == std::vector<int32_t>{kScriptPad, 2, 4});
  // Only the expansion needs a select: step 2's beams continue in place.
  // The last select releases the finished sentence's rows.
  CHECK(model.selects == std::vector<std::vector<int32_t>>{{0, 0}, {}});
}

TEST_CASE("beam search: FirstComplete stops once beam_size hypotheses finished", "[search][beam]") {
  FakeStepModel model = scripted_model(stopping_table());
  const auto results = search(model, kOneSource, beam_options(2, 2, 1.0f, BeamStopping::FirstComplete, 4));
  REQUIRE(results[0].hypotheses.size() == 2);
  check_hypothesis(results[0].hypotheses[0], {1}, std::log(0.6 * 0.5) / 2, true);
  check_hypothesis(results[0].hypotheses[1], {}, std::log(0.35), true);
  CHECK(model.steps.size() == 2);
}

TEST_CASE("beam search: Heuristic stops when the best running beam, at the current length, cannot win",
          "[search][beam]") {
  FakeStepModel model = scripted_model(stopping_table());
  const auto results = search(model, kOneSource, beam_options(2, 2, 1.0f, BeamStopping::Heuristic, 4));
  REQUIRE(results[0].hypotheses.size() == 2);
  // After step 2 the running log(.288) / 2 = -0.62 beats the worst finished log(.35) = -1.05: continue.
  // After step 3 log(.10944) / 3 = -0.74 < log(.3) / 2 = -0.60: stop.
  check_hypothesis(results[0].hypotheses[0], {1, 3}, std::log(0.6 * 0.48 * 0.6) / 3, true);
  check_hypothesis(results[0].hypotheses[1], {1}, std::log(0.6 * 0.5) / 2, true);
  CHECK(model.steps.size() == 3);
}

TEST_CASE("beam search: Never bounds running beams with the maximum length", "[search][beam]") {
  FakeStepModel model = scripted_model(stopping_table());
  const auto results = search(model, kOneSource, beam_options(2, 2, 1.0f, BeamStopping::Never, 4));
  REQUIRE(results[0].hypotheses.size() == 2);
  // After step 3 log(.10944) / 4 = -0.553 > -0.602 (HF divides by max_length for length_penalty > 0):
  // step 4 finds [1,3,5] at log(.103968) / 4 = -0.566, the new best.
  check_hypothesis(results[0].hypotheses[0], {1, 3, 5}, std::log(0.6 * 0.48 * 0.38 * 0.95) / 4, true);
  check_hypothesis(results[0].hypotheses[1], {1, 3}, std::log(0.6 * 0.48 * 0.6) / 3, true);
  CHECK(model.steps.size() == 4);
}

TEST_CASE("beam search: at the maximum length the top beams finish without EOS", "[search][beam]") {
  FakeStepModel model = scripted_model(max_length_table());
  const auto results = search(model, kOneSource, beam_options(2, 2, 1.0f, BeamStopping::Heuristic, 2));
  REQUIRE(results[0].hypotheses.size() == 2);
  check_hypothesis(results[0].hypotheses[0], {2, 5}, std::log(0.4 * 0.9) / 2, false);
  check_hypothesis(results[0].hypotheses[1], {1, 3}, std::log(0.5 * 0.7) / 2, false);
  CHECK(model.steps.size() == 2);
}

TEST_CASE("beam search: forced EOS at the maximum length scores 0", "[search][beam]") {
  FakeStepModel model = scripted_model(max_length_table());
  SearchOptions options = beam_options(2, 2, 1.0f, BeamStopping::Heuristic, 2);
  options.force_eos_at_max_length = true;
  const auto results = search(model, kOneSource, options);
  REQUIRE(results[0].hypotheses.size() == 2);
  // HF's ForcedEOSTokenLogitsProcessor sets EOS to 0 after log_softmax, so the forced step adds nothing.
  check_hypothesis(results[0].hypotheses[0], {1}, std::log(0.5) / 2, true);
  check_hypothesis(results[0].hypotheses[1], {2}, std::log(0.4) / 2, true);
}

TEST_CASE("beam search: done sentences leave the batch", "[search][beam]") {
  // Sentence 0 follows the rank-rule table (done after 3 steps), sentence 1 the stopping table
  // (FirstComplete: done after 2 steps).
  const ScriptedTable first = rank_rule_table();
  const ScriptedTable second = stopping_table();
  FakeStepModel model(kScriptVocab, kScriptEos, kScriptPad, {kScriptPad},
                      [first, second](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
                        return source[0] == 1 ? first.logits(prefix) : second.logits(prefix);
                      });
  const auto results = search(model, {{1, 0}, {2, 0}}, beam_options(2, 2, 1.0f, BeamStopping::FirstComplete, 10));
  REQUIRE(results.size() == 2);
  check_hypothesis(results[0].hypotheses[0], {1, 3}, std::log(0.4 * 0.9 * 0.6) / 3, true);
  check_hypothesis(results[0].hypotheses[1], {2, 4}, std::log(0.3 * 0.45 * 0.9) / 3, true);
  check_hypothesis(results[1].hypotheses[0], {1}, std::log(0.6 * 0.5) / 2, true);
  check_hypothesis(results[1].hypotheses[1], {}, std::log(0.35), true);

  REQUIRE(model.steps.size() == 3);
  CHECK(model.steps[0].size() == 2);
  CHECK(model.steps[1].size() == 4);
  REQUIRE(model.steps[2].size() == 2);
  for (const auto& slot : model.steps[2]) CHECK(slot.sentence == 0);
  // Expand both sentences to two beams, then keep only sentence 0's beams (old slots 0 and 1).
  CHECK(model.selects == std::vector<std::vector<int32_t>>{{0, 0, 1, 1}, {0, 1}, {}});
}

TEST_CASE("beam search: per-sentence maximum lengths in one batch", "[search][beam]") {
  // max_length_b = 1: sources of 2, 3 and 5 ids may generate 2, 3 and 5 tokens. A large EOS penalty keeps
  // every hypothesis running to its own limit.
  FakeStepModel model(10, 0, 9, {9}, [](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
    return hash_logits(source, prefix, 10, 2.0, 0, -20.0);
  });
  SearchOptions options = beam_options(3, 3, 1.0f, BeamStopping::Heuristic, 0);
  options.max_length_b = 1.0f;
  const std::vector<std::vector<int32_t>> sources = {{3, 0}, {4, 5, 0}, {1, 2, 3, 4, 0}};
  const auto results = search(model, sources, options);
  const std::vector<size_t> lengths = {2, 3, 5};
  for (size_t sentence = 0; sentence < sources.size(); ++sentence) {
    REQUIRE(results[sentence].hypotheses.size() == 3);
    for (const auto& hypothesis : results[sentence].hypotheses) {
      CHECK(hypothesis.tokens.size() == lengths[sentence]);
      CHECK_FALSE(hypothesis.finished);
    }
  }
  // Each sentence is stepped exactly as many times as its limit, with at most 3 slots per step.
  std::vector<size_t> steps_per_sentence(3, 0);
  for (const auto& step : model.steps) {
    std::vector<size_t> slots_per_sentence(3, 0);
    for (const auto& slot : step) ++slots_per_sentence[slot.sentence];
    for (size_t sentence = 0; sentence < 3; ++sentence) {
      CHECK(slots_per_sentence[sentence] <= 3);
      if (slots_per_sentence[sentence] > 0) ++steps_per_sentence[sentence];
    }
  }
  CHECK(steps_per_sentence == lengths);
  CHECK(model.steps.size() == 5);
}

TEST_CASE("beam search: a batch gives the results of its sentences searched one at a time", "[search][beam]") {
  const auto logits = [](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
    return hash_logits(source, prefix, 10, 2.0, 0, 1.0);
  };
  const std::vector<std::vector<int32_t>> sources = {{1, 2, 0}, {3, 0}, {4, 4, 4, 4, 0}, {5, 6, 0}, {2, 0}};
  for (BeamStopping stopping : {BeamStopping::Heuristic, BeamStopping::FirstComplete, BeamStopping::Never}) {
    SearchOptions options = beam_options(4, 4, 1.0f, stopping, 0);
    options.max_length_a = 1;
    options.max_length_b = 2.0f;
    FakeStepModel batch_model(10, 0, 9, {9}, logits);
    const auto batch = search(batch_model, sources, options);
    size_t single_slot_steps = 0;
    for (size_t sentence = 0; sentence < sources.size(); ++sentence) {
      FakeStepModel single_model(10, 0, 9, {9}, logits);
      const auto single = search(single_model, {sources[sentence]}, options);
      single_slot_steps += single_model.slot_steps();
      REQUIRE(single[0].hypotheses.size() == batch[sentence].hypotheses.size());
      for (size_t rank = 0; rank < single[0].hypotheses.size(); ++rank) {
        CHECK(single[0].hypotheses[rank].tokens == batch[sentence].hypotheses[rank].tokens);
        CHECK(single[0].hypotheses[rank].score == batch[sentence].hypotheses[rank].score);
        CHECK(single[0].hypotheses[rank].finished == batch[sentence].hypotheses[rank].finished);
      }
    }
    // The shrinking batch computes exactly what the separate searches compute.
    CHECK(batch_model.slot_steps() == single_slot_steps);
  }
}

TEST_CASE("beam search: fewer real continuations than 2 * beam_size give fewer hypotheses", "[search][beam]") {
  // Forced EOS at a maximum length of 1 leaves EOS as the only finite candidate; HF would pad the n-best
  // with placeholder beams scored -1e9, we return the one real hypothesis.
  FakeStepModel model = scripted_model(rank_rule_table());
  SearchOptions options = beam_options(3, 3, 1.0f, BeamStopping::Heuristic, 1);
  options.force_eos_at_max_length = true;
  const auto results = search(model, kOneSource, options);
  REQUIRE(results[0].hypotheses.size() == 1);
  check_hypothesis(results[0].hypotheses[0], {}, 0.0, true);
}

TEST_CASE("beam search: a step without any finite score is an error", "[search][beam]") {
  FakeStepModel model(4, 0, 3, {3}, [](const std::vector<int32_t>&, const std::vector<int32_t>&) {
    const float minus_infinity = -std::numeric_limits<float>::infinity();
    return std::vector<float>{minus_infinity, minus_infinity, minus_infinity, 1.0f};
  });
  CHECK_THROWS_AS(search(model, kOneSource, beam_options(2, 1, 1.0f, BeamStopping::Heuristic, 3)), Error);
}

namespace {

// Claims a vocabulary one larger than the rows it returns.
class WrongVocabModel : public FakeStepModel {
 public:
  WrongVocabModel()
      : FakeStepModel(4, 0, 3, {}, [](const std::vector<int32_t>&, const std::vector<int32_t>&) {
          return std::vector<float>{0.0f, 0.0f, 0.0f, 0.0f};
        }) {}
  int64_t target_vocab_size() const override { return 5; }
};

}  // namespace

TEST_CASE("beam search: step output of the wrong shape is an error", "[search][beam]") {
  WrongVocabModel model;
  CHECK_THROWS_AS(search(model, kOneSource, beam_options(2, 1, 1.0f, BeamStopping::Heuristic, 3)), Error);
}

}  // namespace testing
}  // namespace seqtrans
