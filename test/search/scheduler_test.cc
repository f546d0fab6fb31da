// The decoding scheduler against a scripted step model: sentences join a running decode as others
// finish, rows are freed and reused, the budget is never exceeded, nobody starves, and every sentence gets
// exactly the result it gets when searched alone.
#include <algorithm>
#include <map>
#include <set>

#include "catch.h"
#include "hash_model.h"
#include "scheduler/decoding_scheduler.h"
#include "search/search.h"

namespace seqtrans {
namespace testing {
namespace {

constexpr int32_t kEos = kHashEos;

FakeStepModel hash_model() { return hash_step_model(); }
std::vector<std::vector<int32_t>> sources(size_t count) { return varied_sources(count); }

// What the scheduler did, observed from outside after every iteration.
struct Observation {
  std::map<uint64_t, SearchResult> results;
  std::vector<uint64_t> finish_order;
  size_t most_in_flight = 0;
  size_t most_tokens_in_flight = 0;
  size_t iterations = 0;
};

// Submits `all` and iterates until idle: each sentence's result, finished once.
Observation drain(DecodingScheduler& scheduler, const std::vector<std::vector<int32_t>>& all) {
  for (size_t i = 0; i < all.size(); ++i) scheduler.submit(SessionSentence{i, all[i], i});
  Observation seen;
  std::vector<FinishedSentence> finished;
  while (!scheduler.idle()) {
    finished.clear();
    scheduler.iterate(finished);
    REQUIRE(++seen.iterations < 10000);
    for (FinishedSentence& sentence : finished) {
      REQUIRE(seen.results.count(sentence.id) == 0);
      seen.results[sentence.id] = std::move(sentence.result);
    }
  }
  return seen;
}

Observation run(FakeStepModel& model, const SearchOptions& search, const SchedulerOptions& scheduling,
                const std::vector<std::vector<int32_t>>& all) {
  DecodingScheduler scheduler(model, search, scheduling);
  for (size_t i = 0; i < all.size(); ++i) scheduler.submit(SessionSentence{i, all[i], i});
  Observation seen;
  std::set<uint64_t> in_flight;
  std::vector<FinishedSentence> finished;
  while (!scheduler.idle()) {
    const size_t waiting_before = scheduler.waiting();
    finished.clear();
    scheduler.iterate(finished);
    ++seen.iterations;
    REQUIRE(seen.iterations < 10000);  // no livelock
    // Sentences join in submission order: the ones that left the queue are the next ids.
    const size_t joined = waiting_before - scheduler.waiting();
    const size_t first_joined = all.size() - waiting_before;
    for (size_t id = first_joined; id < first_joined + joined; ++id) in_flight.insert(id);
    size_t tokens = 0;
    for (uint64_t id : in_flight) tokens += all[id].size();
    seen.most_in_flight = std::max(seen.most_in_flight, in_flight.size());
    seen.most_tokens_in_flight = std::max(seen.most_tokens_in_flight, tokens);
    for (FinishedSentence& sentence : finished) {
      REQUIRE(in_flight.erase(sentence.id) == 1);  // finished once, after joining
      REQUIRE(seen.results.count(sentence.id) == 0);
      seen.finish_order.push_back(sentence.id);
      seen.results[sentence.id] = std::move(sentence.result);
    }
    CHECK(scheduler.in_flight() == in_flight.size());
  }
  return seen;
}

// The most rows any step computed.
size_t most_rows(const FakeStepModel& model) {
  size_t most = 0;
  for (const auto& step : model.steps) most = std::max(most, step.size());
  return most;
}

void check_alone_results(const Observation& seen, const SearchOptions& search,
                         const std::vector<std::vector<int32_t>>& all) {
  REQUIRE(seen.results.size() == all.size());
  for (size_t i = 0; i < all.size(); ++i) {
    FakeStepModel alone_model = hash_model();
    SearchOptions options = search;
    // Sampling keys a sentence's stream by its id: alone it must get the same one.
    const std::vector<SearchResult> alone = search_with_streams(alone_model, {all[i]}, options, {i});
    const SearchResult& got = seen.results.at(i);
    REQUIRE(got.hypotheses.size() == alone[0].hypotheses.size());
    for (size_t h = 0; h < got.hypotheses.size(); ++h) {
      CHECK(got.hypotheses[h].tokens == alone[0].hypotheses[h].tokens);
      CHECK(got.hypotheses[h].score == alone[0].hypotheses[h].score);
    }
  }
}

}  // namespace

TEST_CASE("scheduler: sentences join as others finish, within the budget, each as if alone", "[search][scheduler]") {
  const auto all = sources(40);
  for (const int beam : {1, 3}) {
    SearchOptions search;
    search.beam_size = beam;
    search.num_hypotheses = beam == 3 ? 2 : 1;
    search.max_length_a = 9;
    SchedulerOptions scheduling;
    scheduling.max_sentences = 5;
    scheduling.max_tokens = 30;
    scheduling.min_join = 2;
    FakeStepModel model = hash_model();
    const Observation seen = run(model, search, scheduling, all);
    CAPTURE(beam);
    CHECK(seen.most_in_flight <= 5);
    CHECK(seen.most_in_flight >= 4);
    CHECK(seen.most_tokens_in_flight <= 30);
    // Rows are computed only for sentences in flight: never more than the budget's rows.
    CHECK(most_rows(model) <= static_cast<size_t>(5 * beam));
    // Sentences joined while others were decoding (more waves than batch-level batching would need, and
    // finishing out of submission order).
    CHECK(model.admitted.size() > 40 / 5);
    CHECK(!std::is_sorted(seen.finish_order.begin(), seen.finish_order.end()));
    check_alone_results(seen, search, all);
  }
}

TEST_CASE("scheduler: sentences join only while the model's pools have room, and alone regardless",
          "[search][scheduler]") {
  const auto all = sources(30);
  SearchOptions search;
  search.beam_size = 3;
  search.max_length_a = 9;
  SchedulerOptions scheduling;
  scheduling.max_sentences = 8;
  scheduling.max_tokens = 1000;
  scheduling.min_join = 1;
  FakeStepModel model = hash_model();
  model.room_slots = 7;  // two sentences of 3 beams; the third waits
  const Observation seen = run(model, search, scheduling, all);
  CHECK(most_rows(model) <= 7);
  CHECK(seen.most_in_flight == 2);
  check_alone_results(seen, search, all);
  // A room smaller than one sentence: each runs alone, and all finish.
  FakeStepModel tight = hash_model();
  tight.room_slots = 2;
  const Observation alone = run(tight, search, scheduling, all);
  CHECK(alone.most_in_flight == 1);
  CHECK(alone.results.size() == all.size());
}

TEST_CASE("scheduler: batch-level batching admits a batch only when the last one is done", "[search][scheduler]") {
  const auto all = sources(17);
  SearchOptions search;
  search.beam_size = 2;
  search.max_length_a = 7;
  SchedulerOptions scheduling;
  scheduling.batching = Batching::Shrinking;
  scheduling.max_sentences = 4;
  scheduling.max_tokens = 1000;
  FakeStepModel model = hash_model();
  const Observation seen = run(model, search, scheduling, all);
  CHECK(model.admitted == std::vector<size_t>{4, 4, 4, 4, 1});
  check_alone_results(seen, search, all);
}

TEST_CASE("scheduler: a sentence longer than the token budget runs alone and nothing starves", "[search][scheduler]") {
  std::vector<std::vector<int32_t>> all = sources(6);
  all.insert(all.begin() + 2, std::vector<int32_t>(25, 3));  // 25 ids against a budget of 12
  all.back().push_back(kEos);
  SearchOptions search;
  search.beam_size = 1;
  search.max_length_a = 6;
  SchedulerOptions scheduling;
  scheduling.max_sentences = 3;
  scheduling.max_tokens = 12;
  scheduling.min_join = 1;
  FakeStepModel model = hash_model();
  const Observation seen = run(model, search, scheduling, all);
  REQUIRE(seen.results.size() == all.size());
  // The long one waited for the decode to empty, then ran alone; the ones behind it waited for it (FIFO).
  bool long_alone = false;
  for (const auto& step : model.steps)
    if (step.size() == 1 && step[0].prefix.size() == 1 && step[0].sentence == 2) long_alone = true;
  CHECK(long_alone);
  check_alone_results(seen, search, all);
}

TEST_CASE("scheduler: seeded sampling draws the same tokens whatever joins around it", "[search][scheduler]") {
  const auto all = sources(30);
  SearchOptions search;
  search.beam_size = 1;
  search.sampling_topk = 0;
  search.seed = 11;
  search.max_length_a = 9;
  SchedulerOptions scheduling;
  scheduling.max_sentences = 4;
  scheduling.max_tokens = 100;
  scheduling.min_join = 1;
  FakeStepModel model = hash_model();
  const Observation seen = run(model, search, scheduling, all);
  check_alone_results(seen, search, all);
}

TEST_CASE("scheduler: out of memory halves the budget and restarts sentences, with the same results",
          "[search][scheduler]") {
  const auto all = sources(24);
  for (const Batching batching : {Batching::Iteration, Batching::Shrinking}) {
    SearchOptions search;
    search.beam_size = 3;
    search.num_hypotheses = 2;
    search.max_length_a = 9;
    SchedulerOptions scheduling;
    scheduling.batching = batching;
    scheduling.max_sentences = 8;  // up to 24 rows; only 10 fit
    scheduling.max_tokens = 1000;
    scheduling.min_join = 2;
    FakeStepModel model = hash_model();
    model.slot_limit = 10;
    DecodingScheduler scheduler(model, search, scheduling);
    const Observation seen = drain(scheduler, all);
    CAPTURE(batching == Batching::Iteration);
    CHECK(model.out_of_memory_errors > 0);
    CHECK(scheduler.stats().memory_retries == static_cast<size_t>(model.out_of_memory_errors));
    CHECK(model.release_calls == model.out_of_memory_errors);
    // 8 -> 4 -> 2 sentences (3 rows each): at most two halvings before everything fits.
    CHECK(scheduler.max_sentences() >= 2);
    CHECK(scheduler.max_sentences() <= 3);
    check_alone_results(seen, search, all);
  }
}

TEST_CASE("scheduler: pools too large to reserve, or to admit or step beside, are reserved for a halved budget",
          "[search][scheduler]") {
  const auto all = sources(16);
  for (const bool on_admit : {true, false}) {
    CAPTURE(on_admit);
    SearchOptions search;
    search.beam_size = 3;
    search.max_length_a = 9;
    SchedulerOptions scheduling;
    scheduling.max_sentences = 8;  // 24 slots
    scheduling.max_tokens = 1000;
    scheduling.min_join = 4;
    FakeStepModel model = hash_model();
    model.slot_limit = 20;          // 24 reserved slots do not fit: halved to 4 sentences at the start
    model.reserved_slot_limit = 6;  // and pools for more than 2 sentences leave a wave or a step no room
    model.reserved_limit_on_admit = on_admit;
    model.reserved_limit_on_step = !on_admit;
    DecodingScheduler scheduler(model, search, scheduling);
    scheduler.reserve_pools();
    CHECK(scheduler.max_sentences() == 4);
    CHECK(model.reservations == std::vector<int64_t>{12});
    const Observation seen = drain(scheduler, all);
    // The first wave or step fails beside pools for 4 sentences: all restart over pools for 2, which fit.
    CHECK(model.reservations == std::vector<int64_t>{12, 6});
    CHECK(scheduler.max_sentences() == 2);
    CHECK(scheduler.stats().memory_retries == 2);
    check_alone_results(seen, search, all);
  }
}

TEST_CASE("scheduler: sentences admitted in chunks join once complete, while others decode, each as if alone",
          "[search][scheduler]") {
  const auto all = sources(40);
  for (const int beam : {1, 3}) {
    CAPTURE(beam);
    SearchOptions search;
    search.beam_size = beam;
    search.max_length_a = 9;
    SchedulerOptions scheduling;
    scheduling.max_sentences = 5;
    scheduling.max_tokens = 30;
    scheduling.min_join = 2;
    FakeStepModel model = hash_model();
    model.admission_chunk = 3;  // sources of 2 to 9 ids: up to three chunks each
    DecodingScheduler scheduler(model, search, scheduling);
    const Observation seen = drain(scheduler, all);
    // One chunk an iteration, and rows decoded between chunks.
    CHECK(scheduler.stats().admission_shares == static_cast<size_t>(model.admission_calls));
    CHECK(scheduler.stats().admission_shares <= seen.iterations);
    CHECK(model.steps_while_admitting > 0);
    check_alone_results(seen, search, all);
  }
}

TEST_CASE("scheduler: out of memory while sentences are admitted in chunks sheds the admitting ones first",
          "[search][scheduler]") {
  const auto all = sources(24);
  SearchOptions search;
  search.beam_size = 3;
  search.max_length_a = 9;
  SchedulerOptions scheduling;
  scheduling.max_sentences = 8;
  scheduling.max_tokens = 1000;
  scheduling.min_join = 2;
  FakeStepModel model = hash_model();
  model.admission_chunk = 4;
  model.slot_limit = 10;
  DecodingScheduler scheduler(model, search, scheduling);
  const Observation seen = drain(scheduler, all);
  CHECK(model.admission_memory_errors > 0);
  CHECK(scheduler.stats().memory_retries == static_cast<size_t>(model.out_of_memory_errors));
  check_alone_results(seen, search, all);
}

TEST_CASE("session: the newest sentences evicted are the admitting ones, then the decoding ones",
          "[search][scheduler]") {
  const auto all = sources(3);
  SearchOptions search;
  search.max_length_a = 9;
  FakeStepModel model = hash_model();
  model.admission_chunk = 100;  // a share completes every source admitting
  SearchSession session(model, search);
  session.add({SessionSentence{0, all[0], 0}});
  CHECK(session.admitting_sentences() == 1);
  CHECK(session.decoding_sentences() == 0);
  session.continue_admission();
  CHECK(session.decoding_sentences() == 1);
  std::vector<FinishedSentence> finished;
  session.step(finished);
  session.add({SessionSentence{1, all[1], 1}, SessionSentence{2, all[2], 2}});
  CHECK(session.active_sentences() == 3);
  std::vector<SessionSentence> evicted = session.evict_newest(1);
  REQUIRE(evicted.size() == 1);
  CHECK(evicted[0].id == 2);
  CHECK(session.state().admitting() == 1);
  CHECK(session.decoding_sentences() == 1);
  evicted = session.evict_newest(2);  // oldest first: the decoding one, then the one admitting
  REQUIRE(evicted.size() == 2);
  CHECK(evicted[0].id == 0);
  CHECK(evicted[1].id == 1);
  CHECK(evicted[0].source == all[0]);
  CHECK(session.active_sentences() == 0);
  CHECK(session.state().admitting() == 0);
  CHECK(session.state().slots() == 0);
}

TEST_CASE("search: sources admitted in chunks give what sources admitted at once give", "[search][scheduler]") {
  const auto all = sources(12);
  for (const int beam : {1, 4}) {
    CAPTURE(beam);
    SearchOptions search;
    search.beam_size = beam;
    search.max_length_a = 9;
    FakeStepModel at_once = hash_model(), chunked = hash_model();
    chunked.admission_chunk = 2;
    const std::vector<SearchResult> expected = seqtrans::search(at_once, all, search);
    check_same_results(seqtrans::search(chunked, all, search), expected);
    // Sources joined one chunk at a time, the first ones decoding while later ones were still admitted.
    CHECK(chunked.admission_calls >= 12);
    CHECK(chunked.steps_while_admitting > 0);
  }
}

TEST_CASE("scheduler: one sentence that does not fit alone is an error", "[search][scheduler]") {
  SearchOptions search;
  search.beam_size = 3;
  search.max_length_a = 9;
  SchedulerOptions scheduling;
  scheduling.max_sentences = 4;
  FakeStepModel model = hash_model();
  model.slot_limit = 2;  // the first step fits (one slot per sentence), beam 3 rows never do
  DecodingScheduler scheduler(model, search, scheduling);
  for (size_t i = 0; i < 4; ++i) scheduler.submit(SessionSentence{i, sources(4)[i], i});
  std::vector<FinishedSentence> finished;
  bool failed = false;
  for (int i = 0; i < 100 && !failed; ++i) {
    try {
      scheduler.iterate(finished);
    } catch (const OutOfMemoryError&) {
      failed = true;
    }
  }
  CHECK(failed);
  CHECK(scheduler.max_sentences() == 1);
  CHECK(finished.empty());
}

}  // namespace testing
}  // namespace seqtrans
