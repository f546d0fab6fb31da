// HF's forced EOS at the length limit, the same rule in greedy, beam and sampling: with a limit of N
// generated tokens (EOS included; HF max_new_tokens = N, max_length = N + 1 with the decoder start), the
// token at position N can only be EOS, so outputs keep at most N - 1 tokens and always finish; the forced
// EOS adds log-prob 0 (HF's ForcedEOSTokenLogitsProcessor runs on log-probs in beam search).
#include <cmath>

#include "catch.h"
#include "fake_step_model.h"
#include "hash_logits.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

// Sources of different lengths; with max_length_b > 0 each gets its own limit.
const std::vector<std::vector<int32_t>> kSources = {{1, 2, 0}, {3, 0}, {4, 4, 4, 4, 0}, {5, 6, 0}, {2, 0}};

// EOS is never likely (bias -20), so every unforced output runs to the limit.
FakeStepModel no_eos_model() {
  return FakeStepModel(10, 0, 9, {9}, [](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
    return hash_logits(source, prefix, 10, 2.0, 0, -20.0);
  });
}

SearchOptions limit_options(int beam_size, int max_length, bool forced) {
  SearchOptions options;
  options.beam_size = beam_size;
  options.max_length_a = max_length;
  options.max_length_b = 0.0f;
  options.force_eos_at_max_length = forced;
  return options;
}

SearchOptions sampling_limit_options(int max_length, bool forced) {
  SearchOptions options = limit_options(1, max_length, forced);
  options.sampling_topk = 0;
  options.seed = 7;
  return options;
}

}  // namespace

TEST_CASE("forced EOS: greedy keeps the unforced tokens before the limit, and the EOS adds 0",
          "[search][forced_eos]") {
  for (const int limit : {1, 2, 5}) {
    INFO("limit " << limit);
    FakeStepModel model = no_eos_model();
    const auto forced = search(model, kSources, limit_options(1, limit, true));
    FakeStepModel reference_model = no_eos_model();
    // The unforced search cut one position earlier chooses the same tokens with the same log-probs.
    const auto cut = search(reference_model, kSources, limit_options(1, std::max(1, limit - 1), false));
    for (size_t i = 0; i < kSources.size(); ++i) {
      const Hypothesis& hypothesis = forced[i].hypotheses.at(0);
      CHECK(hypothesis.finished);
      CHECK(static_cast<int>(hypothesis.tokens.size()) == limit - 1);
      if (limit == 1) {
        CHECK(hypothesis.score == 0.0f);
        continue;
      }
      CHECK(hypothesis.tokens == cut[i].hypotheses.at(0).tokens);
      CHECK(hypothesis.score == cut[i].hypotheses.at(0).score);
    }
  }
}

TEST_CASE("forced EOS: without it the same outputs run to the limit unfinished", "[search][forced_eos]") {
  FakeStepModel model = no_eos_model();
  for (const auto& result : search(model, kSources, limit_options(1, 5, false))) {
    CHECK_FALSE(result.hypotheses.at(0).finished);
    CHECK(result.hypotheses.at(0).tokens.size() == 5);
  }
}

TEST_CASE("forced EOS: beam search finishes every beam at the limit, normalized by the limit",
          "[search][forced_eos]") {
  FakeStepModel model = no_eos_model();
  SearchOptions options = limit_options(4, 5, true);
  options.num_hypotheses = 4;
  const auto forced = search(model, kSources, options);
  FakeStepModel reference_model = no_eos_model();
  SearchOptions cut_options = limit_options(4, 4, false);
  cut_options.num_hypotheses = 4;
  // Unforced at limit 4: the same 4-token beams, scored sum / 4; forced at 5 they are scored sum / 5.
  const auto cut = search(reference_model, kSources, cut_options);
  for (size_t i = 0; i < kSources.size(); ++i) {
    REQUIRE(forced[i].hypotheses.size() == 4);
    REQUIRE(cut[i].hypotheses.size() == 4);
    for (size_t k = 0; k < 4; ++k) {
      const Hypothesis& hypothesis = forced[i].hypotheses[k];
      CHECK(hypothesis.finished);
      CHECK(hypothesis.tokens == cut[i].hypotheses[k].tokens);
      CHECK(hypothesis.score == Approx(cut[i].hypotheses[k].score * 4.0f / 5.0f).epsilon(1e-6));
    }
  }
}

TEST_CASE("forced EOS: sampling draws the same tokens and ends with EOS at the limit", "[search][forced_eos]") {
  FakeStepModel model = no_eos_model();
  const auto forced = search(model, kSources, sampling_limit_options(6, true));
  FakeStepModel reference_model = no_eos_model();
  const auto cut = search(reference_model, kSources, sampling_limit_options(5, false));
  for (size_t i = 0; i < kSources.size(); ++i) {
    const Hypothesis& hypothesis = forced[i].hypotheses.at(0);
    CHECK(hypothesis.finished);
    CHECK(hypothesis.tokens == cut[i].hypotheses.at(0).tokens);
    CHECK(hypothesis.score == cut[i].hypotheses.at(0).score);
  }
}

TEST_CASE("forced EOS: per-sentence limits (max_length_b) in one batch", "[search][forced_eos]") {
  for (const int beam : {1, 3}) {
    INFO("beam " << beam);
    FakeStepModel model = no_eos_model();
    SearchOptions options = limit_options(beam, 0, true);
    options.max_length_b = 1.0f;  // limit = source length
    const auto results = search(model, kSources, options);
    for (size_t i = 0; i < kSources.size(); ++i) {
      CHECK(results[i].hypotheses.at(0).finished);
      CHECK(results[i].hypotheses.at(0).tokens.size() == kSources[i].size() - 1);
    }
  }
}

TEST_CASE("forced EOS wins over min_length at the limit, as HF applies it last", "[search][forced_eos]") {
  for (const int beam : {1, 4}) {
    INFO("beam " << beam);
    FakeStepModel model = no_eos_model();
    SearchOptions options = limit_options(beam, 4, true);
    options.min_length = 10;
    for (const auto& result : search(model, kSources, options)) {
      CHECK(result.hypotheses.at(0).finished);
      CHECK(result.hypotheses.at(0).tokens.size() == 3);
    }
  }
}

}  // namespace testing
}  // namespace seqtrans
