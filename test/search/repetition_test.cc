// Repetition controls in beam search act on log-probs, as HF's beam search applies its processors after
// log_softmax: a hand-worked scripted beam, with and without the penalty and the n-gram ban.
#include <cmath>

#include "catch.h"
#include "fake_step_model.h"
#include "scripted_logits.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

// After 1, repeating 1 is likely (0.5) but 3 is close (0.45); after 2, 4 (0.8).
ScriptedTable repeat_table() {
  return ScriptedTable({{0, 0.5}}).on({}, {{1, 0.6}, {2, 0.3}}).on({1}, {{1, 0.5}, {3, 0.45}}).on({2}, {{4, 0.8}});
}

std::vector<Hypothesis> beam_of_two(float penalty, int ngram) {
  const ScriptedTable table = repeat_table();
  FakeStepModel model(kScriptVocab, kScriptEos, kScriptPad, {kScriptPad},
                      [table](const std::vector<int32_t>&, const std::vector<int32_t>& prefix) {
                        return table.logits(prefix);
                      });
  SearchOptions options;
  options.beam_size = 2;
  options.num_hypotheses = 2;
  options.length_penalty = 0.0f;  // scores are plain sums
  options.max_length_a = 2;
  options.max_length_b = 0.0f;
  options.repetition_penalty = penalty;
  options.no_repeat_ngram_size = ngram;
  return search(model, {{1, 0}}, options)[0].hypotheses;
}

}  // namespace

TEST_CASE("beam search: repetition controls act on log-probs", "[search][repetition]") {
  // Without controls: 1 1 (0.3), then 1 3 (0.27).
  const auto plain = beam_of_two(1.0f, 0);
  REQUIRE(plain.size() == 2);
  CHECK(plain[0].tokens == std::vector<int32_t>{1, 1});
  CHECK(plain[0].score == Approx(std::log(0.6 * 0.5)).epsilon(1e-5));
  CHECK(plain[1].tokens == std::vector<int32_t>{1, 3});

  // Penalty 2 doubles the repeated 1's log-prob: log 0.6 + 2 log 0.5 = log 0.15 falls behind 1 3 (0.27)
  // and 2 4 (0.24). Applied to logits before log_softmax it would be a different number.
  const auto penalized = beam_of_two(2.0f, 0);
  REQUIRE(penalized.size() == 2);
  CHECK(penalized[0].tokens == std::vector<int32_t>{1, 3});
  CHECK(penalized[0].score == Approx(std::log(0.6 * 0.45)).epsilon(1e-5));
  CHECK(penalized[1].tokens == std::vector<int32_t>{2, 4});
  CHECK(penalized[1].score == Approx(std::log(0.3 * 0.8)).epsilon(1e-5));

  // No repeated 1-gram: 1 1 is banned outright.
  const auto banned = beam_of_two(1.0f, 1);
  REQUIRE(banned.size() == 2);
  CHECK(banned[0].tokens == std::vector<int32_t>{1, 3});
  CHECK(banned[1].tokens == std::vector<int32_t>{2, 4});
}

}  // namespace testing
}  // namespace seqtrans
