// Greedy steps run several at once (SearchSession with StepModel::steps_per_read > 1): each step after the
// first feeds every slot the best candidate of the step before, and the host reads them all after the last.
// Results must be those of steps read one at a time: with sentences ending inside a run of steps (their later
// rows wasted), minimum lengths (EOS banned ahead), target prefixes (forced one step at a time), and sentences
// joining a running decode through the scheduler.
#include <map>
#include <vector>

#include "catch.h"
#include "hash_model.h"
#include "scheduler/decoding_scheduler.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

constexpr int32_t kEos = kHashEos;

FakeStepModel hash_model(int steps_at_once) {
  FakeStepModel model = hash_step_model();
  model.steps_at_once = steps_at_once;
  return model;
}

std::vector<std::vector<int32_t>> sources(size_t count) { return varied_sources(count); }

SearchOptions greedy(int min_length = 0) {
  SearchOptions options;
  options.beam_size = 1;
  options.max_length_a = 12;
  options.max_length_b = 0.0f;
  options.min_length = min_length;
  return options;
}

}  // namespace

TEST_CASE("steps at once: one sentence runs its steps in groups and wastes at most a group's tail",
          "[search][steps_at_once]") {
  const std::vector<std::vector<int32_t>> one = {{3, 4, kEos}};
  FakeStepModel single = hash_model(1), grouped = hash_model(4);
  check_same_results(search(grouped, one, greedy()), search(single, one, greedy()));
  const size_t steps = single.steps.size();
  REQUIRE(steps >= 2);
  // Whole groups of 4 (the last one cut by the length limit of 12 + EOS), the tail after EOS wasted.
  CHECK(grouped.steps.size() >= steps);
  CHECK(grouped.steps.size() < steps + 4);
  // Each step fed the token the step before chose: the single run's inputs, then tokens past its end.
  for (size_t i = 0; i < steps; ++i) CHECK(grouped.steps[i][0].prefix == single.steps[i][0].prefix);
}

TEST_CASE("steps at once: batches give the results of steps read one at a time", "[search][steps_at_once]") {
  const std::vector<std::vector<int32_t>> all = sources(11);
  for (const int min_length : {0, 3, 6}) {
    for (const int at_once : {2, 4, 7}) {
      CAPTURE(min_length, at_once);
      FakeStepModel single = hash_model(1), grouped = hash_model(at_once);
      check_same_results(search(grouped, all, greedy(min_length)), search(single, all, greedy(min_length)));
      // Rows of sentences that ended inside a group are the only extra work: fewer than a group a sentence.
      CHECK(grouped.slot_steps() >= single.slot_steps());
      CHECK(grouped.slot_steps() < single.slot_steps() + all.size() * static_cast<size_t>(at_once));
      CHECK(grouped.steps.size() >= single.steps.size());
    }
  }
}

TEST_CASE("steps at once: a target prefix is forced one step at a time, then steps group", "[search][steps_at_once]") {
  const std::vector<std::vector<int32_t>> all = sources(5);
  const std::vector<std::vector<int32_t>> prefixes = {{4, 5}, {}, {6}, {2, 3, 4}, {}};
  const std::vector<uint64_t> streams = {0, 1, 2, 3, 4};
  FakeStepModel single = hash_model(1), grouped = hash_model(4);
  const auto expected = search_with_streams(single, all, greedy(), streams, prefixes);
  const auto actual = search_with_streams(grouped, all, greedy(), streams, prefixes);
  check_same_results(actual, expected);
  for (size_t i = 0; i < prefixes.size(); ++i) {
    const std::vector<int32_t>& tokens = actual[i].hypotheses[0].tokens;
    REQUIRE(tokens.size() >= prefixes[i].size());
    CHECK(std::vector<int32_t>(tokens.begin(), tokens.begin() + static_cast<std::ptrdiff_t>(prefixes[i].size())) ==
          prefixes[i]);
  }
}

TEST_CASE("steps at once: sentences joining a running decode get the results they get alone",
          "[search][steps_at_once]") {
  const std::vector<std::vector<int32_t>> all = sources(17);
  for (const size_t max_sentences : {size_t{1}, size_t{3}, size_t{8}}) {
    CAPTURE(max_sentences);
    FakeStepModel alone = hash_model(1), grouped = hash_model(4);
    std::vector<SearchResult> expected;
    for (const auto& source : all) expected.push_back(search(alone, {source}, greedy()).at(0));
    SchedulerOptions scheduling;
    scheduling.max_sentences = max_sentences;
    scheduling.max_tokens = 1000;
    scheduling.min_join = 1;
    DecodingScheduler scheduler(grouped, greedy(), scheduling);
    for (size_t i = 0; i < all.size(); ++i) scheduler.submit(SessionSentence{i, all[i], i});
    std::map<uint64_t, SearchResult> results;
    std::vector<FinishedSentence> finished;
    for (size_t iterations = 0; !scheduler.idle(); ++iterations) {
      REQUIRE(iterations < 10000);
      finished.clear();
      scheduler.iterate(finished);
      for (FinishedSentence& sentence : finished) results[sentence.id] = std::move(sentence.result);
    }
    std::vector<SearchResult> actual;
    for (auto& [id, result] : results) actual.push_back(std::move(result));
    check_same_results(actual, expected);
    // Counted as the steps they are.
    CHECK(scheduler.stats().steps == grouped.steps.size());
  }
}

TEST_CASE("steps at once: beam search and sampling read every step", "[search][steps_at_once]") {
  const std::vector<std::vector<int32_t>> all = sources(4);
  SearchOptions beam = greedy();
  beam.beam_size = 3;
  SearchOptions sampling = greedy();
  sampling.sampling_topk = 5;
  sampling.seed = 3;
  for (const SearchOptions& options : {beam, sampling}) {
    FakeStepModel single = hash_model(1), grouped = hash_model(4);
    const auto expected = search(single, all, options), actual = search(grouped, all, options);
    REQUIRE(actual.size() == expected.size());
    for (size_t i = 0; i < actual.size(); ++i) CHECK(actual[i].hypotheses[0].tokens == expected[i].hypotheses[0].tokens);
    CHECK(grouped.steps.size() == single.steps.size());
  }
}

}  // namespace testing
}  // namespace seqtrans
