// Random sampling: determinism, agreement with greedy where the filters leave one token, and empirical
// frequencies against the filtered softmax.
#include "search/sampling.h"

#include <cmath>
#include <limits>
#include <random>
#include <vector>

#include "catch.h"
#include "fake_step_model.h"
#include "hash_logits.h"
#include "search/search.h"
#include "support/hf_warpers.h"

namespace seqtrans {
namespace testing {
namespace {

const std::vector<std::vector<int32_t>> kSources = {{1, 2, 0}, {3, 0}, {4, 4, 4, 4, 0}, {5, 6, 0}, {2, 0}, {7, 1, 0}};

FakeStepModel hash_model() {
  return FakeStepModel(10, 0, 9, {9}, [](const std::vector<int32_t>& source, const std::vector<int32_t>& prefix) {
    return hash_logits(source, prefix, 10, 2.0, 0, 0.5);
  });
}

SearchOptions sampling_options(int topk, float topp, float temperature, uint64_t seed) {
  SearchOptions options;
  options.beam_size = 1;
  options.sampling_topk = topk;
  options.sampling_topp = topp;
  options.temperature = temperature;
  options.seed = seed;
  options.max_length_a = 8;
  options.max_length_b = 0.0f;
  return options;
}

// One step over a fixed distribution: logits log(p) for EOS, 1, 2, 3 and a suppressed pad (id 4).
const std::vector<double> kProbabilities = {0.1, 0.2, 0.3, 0.35, 0.05};

FakeStepModel fixed_model() {
  return FakeStepModel(5, 0, 4, {4}, [](const std::vector<int32_t>&, const std::vector<int32_t>&) {
    std::vector<float> logits;
    for (double probability : kProbabilities) logits.push_back(static_cast<float>(std::log(probability)));
    return logits;
  });
}

// Frequencies of the first sampled token over `draws` one-step sentences (each with its own stream).
std::vector<double> first_token_frequencies(const SearchOptions& base, int draws) {
  SearchOptions options = base;
  options.max_length_a = 1;
  FakeStepModel model = fixed_model();
  const std::vector<std::vector<int32_t>> sources(static_cast<size_t>(draws), std::vector<int32_t>{1, 0});
  const auto results = search(model, sources, options);
  std::vector<double> frequencies(5, 0.0);
  for (const SearchResult& result : results) {
    const auto& tokens = result.hypotheses[0].tokens;
    frequencies[tokens.empty() ? 0 : tokens[0]] += 1.0 / draws;
  }
  return frequencies;
}

void check_frequencies(const std::vector<double>& frequencies, const std::vector<double>& expected) {
  REQUIRE(frequencies.size() == expected.size());
  for (size_t id = 0; id < expected.size(); ++id) {
    INFO("id " << id);
    CHECK(std::abs(frequencies[id] - expected[id]) < 0.015);
  }
}

}  // namespace

TEST_CASE("sampling: the same seed gives the same output", "[search][sampling]") {
  FakeStepModel first_model = hash_model();
  FakeStepModel second_model = hash_model();
  FakeStepModel other_model = hash_model();
  const auto first = search(first_model, kSources, sampling_options(0, 1.0f, 1.0f, 42));
  const auto second = search(second_model, kSources, sampling_options(0, 1.0f, 1.0f, 42));
  const auto other = search(other_model, kSources, sampling_options(0, 1.0f, 1.0f, 43));
  bool any_difference = false;
  for (size_t sentence = 0; sentence < kSources.size(); ++sentence) {
    CHECK(first[sentence].hypotheses[0].tokens == second[sentence].hypotheses[0].tokens);
    CHECK(first[sentence].hypotheses[0].score == second[sentence].hypotheses[0].score);
    any_difference |= first[sentence].hypotheses[0].tokens != other[sentence].hypotheses[0].tokens;
  }
  CHECK(any_difference);
}

TEST_CASE("sampling: top-k 1 and a tiny top-p equal greedy", "[search][sampling]") {
  FakeStepModel greedy_model = hash_model();
  SearchOptions greedy = sampling_options(1, 1.0f, 1.0f, 0);
  const auto expected = search(greedy_model, kSources, greedy);
  for (const SearchOptions& options :
       {sampling_options(1, 0.9f, 0.7f, 5), sampling_options(0, 1e-6f, 1.0f, 6), sampling_options(3, 1e-6f, 2.0f, 7)}) {
    REQUIRE(search_kind(options) == SearchKind::Sampling);
    FakeStepModel model = hash_model();
    const auto results = search(model, kSources, options);
    for (size_t sentence = 0; sentence < kSources.size(); ++sentence) {
      CHECK(results[sentence].hypotheses[0].tokens == expected[sentence].hypotheses[0].tokens);
      CHECK(results[sentence].hypotheses[0].score == expected[sentence].hypotheses[0].score);
      CHECK(results[sentence].hypotheses[0].finished == expected[sentence].hypotheses[0].finished);
    }
  }
}

TEST_CASE("sampling: frequencies follow the softmax of the unsuppressed ids", "[search][sampling]") {
  // The pad (id 4) is suppressed: the rest renormalize over 0.95.
  check_frequencies(first_token_frequencies(sampling_options(0, 1.0f, 1.0f, 1), 20000),
                    {0.1 / 0.95, 0.2 / 0.95, 0.3 / 0.95, 0.35 / 0.95, 0.0});
}

TEST_CASE("sampling: temperature sharpens the distribution", "[search][sampling]") {
  // Temperature 0.5 squares the probabilities before renormalizing.
  const double total = 0.01 + 0.04 + 0.09 + 0.1225;
  check_frequencies(first_token_frequencies(sampling_options(0, 1.0f, 0.5f, 2), 20000),
                    {0.01 / total, 0.04 / total, 0.09 / total, 0.1225 / total, 0.0});
}

TEST_CASE("sampling: top-k keeps the k most likely ids", "[search][sampling]") {
  check_frequencies(first_token_frequencies(sampling_options(2, 1.0f, 1.0f, 3), 20000),
                    {0.0, 0.0, 0.3 / 0.65, 0.35 / 0.65, 0.0});
}

TEST_CASE("sampling: top-p keeps the smallest nucleus reaching p", "[search][sampling]") {
  // Renormalized: .105, .211, .316, .368. Ascending cumulative .105, .316, .632: with p = 0.6 the
  // tail <= 0.4 ({0, 1}) goes, leaving {2, 3}.
  check_frequencies(first_token_frequencies(sampling_options(0, 0.6f, 1.0f, 4), 20000),
                    {0.0, 0.0, 0.3 / 0.65, 0.35 / 0.65, 0.0});
}

TEST_CASE("sampling: scores are log-probs under the unmodified log_softmax", "[search][sampling]") {
  FakeStepModel model = fixed_model();
  SearchOptions options = sampling_options(2, 0.9f, 0.3f, 9);
  options.max_length_a = 1;
  const auto results = search(model, {{1, 0}, {1, 0}, {1, 0}, {1, 0}}, options);
  for (const SearchResult& result : results) {
    const Hypothesis& hypothesis = result.hypotheses[0];
    REQUIRE(hypothesis.tokens.size() == 1);
    // log_softmax of the raw logits log(p) is log(p): temperature and filters do not enter the score.
    CHECK(hypothesis.score == Approx(std::log(kProbabilities[hypothesis.tokens[0]])).epsilon(1e-6));
  }
}

TEST_CASE("sampling: a sentence's draws do not depend on the rest of the batch", "[search][sampling]") {
  // Each sentence's stream is keyed by its line (here 20 + i), not by its place in the batch: the last
  // sentence sampled alone, at place 0, draws what it drew at the end of the batch.
  const std::vector<uint64_t> lines = {20, 21, 22, 23};
  REQUIRE(kSources.size() >= lines.size());
  const std::vector<std::vector<int32_t>> sources(kSources.begin(), kSources.begin() + 4);
  FakeStepModel batch_model = hash_model();
  const auto batch = search_with_streams(batch_model, sources, sampling_options(0, 1.0f, 1.0f, 11), lines);
  FakeStepModel single_model = hash_model();
  const auto single = search_with_streams(single_model, {sources[3]}, sampling_options(0, 1.0f, 1.0f, 11), {23});
  CHECK(single[0].hypotheses[0].tokens == batch[3].hypotheses[0].tokens);
  // Keyed by place instead, it would draw differently: the stream matters.
  FakeStepModel other_model = hash_model();
  const auto other = search_with_streams(other_model, {sources[3]}, sampling_options(0, 1.0f, 1.0f, 11), {0});
  CHECK(other[0].hypotheses[0].tokens != batch[3].hypotheses[0].tokens);
}

TEST_CASE("sampling: n-best gives independent samples, sample s the same whatever N", "[search][sampling]") {
  SearchOptions one = sampling_options(0, 1.0f, 1.3f, 21);
  SearchOptions three = one, five = one;
  three.num_hypotheses = 3;
  five.num_hypotheses = 5;
  FakeStepModel one_model = hash_model(), three_model = hash_model(), five_model = hash_model();
  const auto single = search(one_model, kSources, one);
  const auto three_samples = search(three_model, kSources, three);
  const auto five_samples = search(five_model, kSources, five);
  bool samples_differ = false;
  for (size_t sentence = 0; sentence < kSources.size(); ++sentence) {
    REQUIRE(three_samples[sentence].hypotheses.size() == 3);
    REQUIRE(five_samples[sentence].hypotheses.size() == 5);
    // Sample 0 is the one-sample run's; the first three of five are the three of three (sample order).
    CHECK(three_samples[sentence].hypotheses[0].tokens == single[sentence].hypotheses[0].tokens);
    CHECK(three_samples[sentence].hypotheses[0].score == single[sentence].hypotheses[0].score);
    for (size_t s = 0; s < 3; ++s) {
      CHECK(five_samples[sentence].hypotheses[s].tokens == three_samples[sentence].hypotheses[s].tokens);
      CHECK(five_samples[sentence].hypotheses[s].score == three_samples[sentence].hypotheses[s].score);
    }
    for (size_t s = 1; s < 5; ++s)
      samples_differ |= five_samples[sentence].hypotheses[s].tokens != five_samples[sentence].hypotheses[0].tokens;
  }
  CHECK(samples_differ);
  // A sentence's samples start together: its admitted slot is repeated once per sample, at position 0.
  REQUIRE(!five_model.steps.empty());
  CHECK(five_model.steps[0].size() == 5 * kSources.size());
}

TEST_CASE("sampling: min_length bans EOS per draw, min-p alone samples", "[search][sampling]") {
  SearchOptions options = sampling_options(0, 1.0f, 1.0f, 8);
  options.min_length = 3;
  options.num_hypotheses = 4;
  FakeStepModel model = hash_model();
  for (const SearchResult& result : search(model, kSources, options))
    for (const Hypothesis& sample : result.hypotheses) CHECK(sample.tokens.size() >= 3);
  // Min-p 1 keeps only the best token: greedy again.
  SearchOptions min_p = sampling_options(1, 1.0f, 1.0f, 0);
  FakeStepModel greedy_model = hash_model();
  const auto greedy = search(greedy_model, kSources, min_p);
  min_p.sampling_topk = 0;
  min_p.sampling_minp = 1.0f;
  REQUIRE(search_kind(min_p) == SearchKind::Sampling);
  FakeStepModel min_p_model = hash_model();
  const auto results = search(min_p_model, kSources, min_p);
  for (size_t sentence = 0; sentence < kSources.size(); ++sentence)
    CHECK(results[sentence].hypotheses[0].tokens == greedy[sentence].hypotheses[0].tokens);
}

// Two-token samples of a scripted model whose second-step logits depend on the first token: the pairs'
// frequencies must follow the product of HF's warped distributions at both steps (chi-square), which also
// checks that steps and samples draw independently.
void check_two_step_frequencies(const testing::Warpers& warpers, uint64_t seed) {
  constexpr int64_t kVocab = 8;  // EOS 0, words 1..6, pad 7 (suppressed, the decoder start)
  const float minus_infinity = -std::numeric_limits<float>::infinity();
  const std::vector<float> first = {-1.5f, 0.7f, 1.9f, -0.3f, 1.2f, 0.1f, 1.9f, minus_infinity};
  const auto second = [&](int32_t previous) {
    std::vector<float> logits(kVocab, minus_infinity);
    for (int32_t id = 0; id < 7; ++id) logits[id] = first[(id + previous) % 7];
    return logits;
  };
  FakeStepModel model(kVocab, 0, 7, {7}, [&](const std::vector<int32_t>&, const std::vector<int32_t>& prefix) {
    return prefix.size() == 1 ? first : second(prefix.back());
  });
  SearchOptions options = sampling_options(warpers.top_k, warpers.top_p, warpers.temperature, seed);
  options.sampling_minp = warpers.min_p;
  options.max_length_a = 2;
  options.num_hypotheses = 4;
  const std::vector<std::vector<int32_t>> sources(5000, std::vector<int32_t>{1, 0});
  std::vector<int32_t> cells;  // first * kVocab + second (second 0 when the first is EOS)
  for (const SearchResult& result : search(model, sources, options))
    for (const Hypothesis& sample : result.hypotheses) {
      const int32_t a = sample.tokens.empty() ? 0 : sample.tokens[0];
      const int32_t b = sample.tokens.size() < 2 ? 0 : sample.tokens[1];
      cells.push_back(a * static_cast<int32_t>(kVocab) + b);
    }
  const std::vector<double> p_first = testing::warped_distribution(first, warpers);
  std::vector<double> expected(static_cast<size_t>(kVocab * kVocab), 0.0);
  for (int32_t a = 0; a < kVocab; ++a) {
    if (a == 0) {
      expected[0] += p_first[0];
      continue;
    }
    const std::vector<double> p_second = testing::warped_distribution(second(a), warpers);
    for (int32_t b = 0; b < kVocab; ++b) expected[a * kVocab + b] += p_first[a] * p_second[b];
  }
  testing::check_chi_square(cells, expected);
}

TEST_CASE("sampling: two-step frequencies follow HF's warpers (chi-square)", "[search][sampling]") {
  SECTION("whole vocabulary") { check_two_step_frequencies({0, 1.0f, 0.0f, 1.0f}, 31); }
  SECTION("top-k") { check_two_step_frequencies({3, 1.0f, 0.0f, 1.0f}, 32); }
  SECTION("top-p") { check_two_step_frequencies({0, 0.7f, 0.0f, 1.0f}, 33); }
  SECTION("min-p") { check_two_step_frequencies({0, 1.0f, 0.3f, 1.0f}, 34); }
  SECTION("all, with temperature") { check_two_step_frequencies({5, 0.85f, 0.1f, 0.7f}, 35); }
}

TEST_CASE("sampling with beam_size > 1 is refused", "[search][sampling]") {
  FakeStepModel model = hash_model();
  SearchOptions options = sampling_options(5, 1.0f, 1.0f, 0);
  options.beam_size = 2;
  CHECK_THROWS_WITH(search(model, kSources, options),
                    "sampling (sampling_topk=5, sampling_topp=1, sampling_minp=0) needs beam_size 1, got beam_size 2");
}

}  // namespace testing
}  // namespace seqtrans
