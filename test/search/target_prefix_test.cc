// Target prefixes (CTranslate2's target_prefix, HF's decoder_input_ids): every hypothesis starts with the
// prefix, whose tokens add 0 to the score; lengths (limit, normalization) count the tokens after it.
#include <cmath>

#include "catch.h"
#include "fake_step_model.h"
#include "hash_logits.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

constexpr int64_t kVocab = 10;
constexpr int32_t kEos = 0, kPad = 9;

std::vector<float> logits_of(const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
  return hash_logits(source, prefix, kVocab, 2.0, kEos, 0.5);
}

FakeStepModel prefix_model() { return FakeStepModel(kVocab, kEos, kPad, {kPad}, logits_of); }

// log_softmax(logits of `source` after the decoder inputs `inputs`)[token], in double.
double log_prob(const std::vector<int32_t>& source, const std::vector<int32_t>& inputs, int32_t token) {
  const std::vector<float> row = logits_of(source, inputs);
  double sum = 0.0;
  for (float value : row) sum += std::exp(static_cast<double>(value));
  return static_cast<double>(row[token]) - std::log(sum);
}

// The summed log-probs of `tokens` (then EOS when finished) after the first `skip` tokens.
double continuation_log_prob(const std::vector<int32_t>& source, const Hypothesis& hypothesis, size_t skip) {
  std::vector<int32_t> inputs{kPad};
  std::vector<int32_t> chosen = hypothesis.tokens;
  if (hypothesis.finished) chosen.push_back(kEos);
  double total = 0.0;
  for (size_t i = 0; i < chosen.size(); ++i) {
    if (i >= skip) total += log_prob(source, inputs, chosen[i]);
    inputs.push_back(chosen[i]);
  }
  return total;
}

const std::vector<std::vector<int32_t>> kSources = {{1, 2, 0}, {3, 4, 5, 0}, {6, 0}};
const std::vector<std::vector<int32_t>> kPrefixes = {{4, 4}, {}, {7, 1, 2}};

SearchOptions options_of(int beam, int groups) {
  SearchOptions options;
  options.beam_size = beam;
  options.beam_groups = groups;
  options.num_hypotheses = beam;
  options.max_length_a = 4;
  options.max_length_b = 0.0f;
  return options;
}

std::vector<SearchResult> run(const SearchOptions& options) {
  FakeStepModel model = prefix_model();
  return search_with_streams(model, kSources, options, {0, 1, 2}, kPrefixes);
}

}  // namespace

TEST_CASE("target prefix: every hypothesis starts with it; scores and lengths count what follows",
          "[search][prefix]") {
  for (const auto& [beam, groups] : std::vector<std::pair<int, int>>{{1, 1}, {3, 1}, {4, 2}}) {
    CAPTURE(beam, groups);
    const SearchOptions options = options_of(beam, groups);
    const auto results = run(options);
    for (size_t sentence = 0; sentence < kSources.size(); ++sentence) {
      const std::vector<int32_t>& prefix = kPrefixes[sentence];
      REQUIRE(!results[sentence].hypotheses.empty());
      for (const Hypothesis& hypothesis : results[sentence].hypotheses) {
        CAPTURE(sentence, hypothesis.tokens);
        REQUIRE(hypothesis.tokens.size() >= prefix.size());
        CHECK(std::equal(prefix.begin(), prefix.end(), hypothesis.tokens.begin()));
        // At most max_length_a tokens after the prefix, EOS included.
        const size_t after = hypothesis.tokens.size() - prefix.size() + (hypothesis.finished ? 1 : 0);
        CHECK(after <= 4);
        // Greedy: the continuation's log-probs; beam: divided by its length (length_penalty 1). The groups'
        // scores hold diversity penalties, which is why only plain beams are checked here.
        if (groups > 1) continue;
        const double expected = continuation_log_prob(kSources[sentence], hypothesis, prefix.size()) /
                                (beam > 1 ? static_cast<double>(after) : 1.0);
        CHECK(hypothesis.score == Approx(expected).epsilon(1e-5));
      }
    }
  }
}

TEST_CASE("target prefix: the start of greedy's own output changes nothing but the score", "[search][prefix]") {
  SearchOptions options = options_of(1, 1);
  options.max_length_a = 6;
  FakeStepModel free_model = prefix_model();
  const auto free = search(free_model, kSources, options);
  for (size_t sentence = 0; sentence < kSources.size(); ++sentence) {
    const Hypothesis& reference = free[sentence].hypotheses[0];
    if (reference.tokens.size() < 2) continue;
    const std::vector<int32_t> prefix(reference.tokens.begin(), reference.tokens.begin() + 2);
    // The prefix shifts the length limit by its own length: 2 more tokens may follow.
    SearchOptions shorter = options;
    shorter.max_length_a = 4;
    FakeStepModel model = prefix_model();
    const auto forced = search_with_streams(model, {kSources[sentence]}, shorter, {sentence}, {prefix});
    const Hypothesis& hypothesis = forced[0].hypotheses[0];
    CHECK(hypothesis.tokens == reference.tokens);
    CHECK(hypothesis.finished == reference.finished);
    const double prefix_log_prob = log_prob(kSources[sentence], {kPad}, prefix[0]) +
                                   log_prob(kSources[sentence], {kPad, prefix[0]}, prefix[1]);
    CHECK(hypothesis.score == Approx(reference.score - prefix_log_prob).epsilon(1e-5));
  }
}

TEST_CASE("target prefix: samples start with it and agree with greedy under top-k 1", "[search][prefix]") {
  SearchOptions sampling = options_of(1, 1);
  sampling.sampling_topk = 0;
  sampling.num_hypotheses = 3;
  sampling.seed = 5;
  const auto samples = run(sampling);
  for (size_t sentence = 0; sentence < kSources.size(); ++sentence)
    for (const Hypothesis& sample : samples[sentence].hypotheses)
      CHECK(std::equal(kPrefixes[sentence].begin(), kPrefixes[sentence].end(), sample.tokens.begin()));
  SearchOptions top1 = options_of(1, 1);
  top1.sampling_topp = 0.5f;  // with top-k 1: the best token, drawn
  const auto drawn = run(top1);
  const auto greedy = run(options_of(1, 1));
  for (size_t sentence = 0; sentence < kSources.size(); ++sentence) {
    CHECK(drawn[sentence].hypotheses[0].tokens == greedy[sentence].hypotheses[0].tokens);
    CHECK(drawn[sentence].hypotheses[0].score == greedy[sentence].hypotheses[0].score);
  }
}

TEST_CASE("target prefix: EOS or an id outside the vocabulary is refused", "[search][prefix]") {
  FakeStepModel model = prefix_model();
  CHECK_THROWS_WITH(search_with_streams(model, {{1, 0}}, options_of(1, 1), {0}, {{3, kEos}}),
                    "target prefix id 0 is EOS or outside the vocabulary of 10");
  CHECK_THROWS_AS(search_with_streams(model, {{1, 0}}, options_of(1, 1), {0}, {{12}}), Error);
}

}  // namespace testing
}  // namespace seqtrans
