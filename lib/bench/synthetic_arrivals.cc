#include "bench/synthetic_arrivals.h"

#include <algorithm>
#include <chrono>
#include <memory>
#include <thread>

#include "core/error.h"
#include "models/engine_model.h"

namespace seqtrans::bench {
namespace {

using Clock = std::chrono::steady_clock;

// One mode's scheduler options: one at a time is iteration-level batching with room for one sentence, so
// that a sentence starts the moment the one before it ends.
SchedulerOptions scheduling_for(ArrivalBatching mode, const SchedulerOptions& budget) {
  SchedulerOptions scheduling = budget;
  scheduling.batching = mode == ArrivalBatching::Shrinking ? Batching::Shrinking : Batching::Iteration;
  if (mode == ArrivalBatching::OneAtATime) scheduling.max_sentences = scheduling.min_join = 1;
  return scheduling;
}

SessionSentence sentence_of(const std::vector<std::vector<int32_t>>& sources, size_t index) {
  return SessionSentence{index, sources[index], index, {}};
}

// The first `count` sentences at once, until all are done: untimed, so that the timed runs find the pools
// sized and the full row count's graph recorded, as the real mode's untimed pass leaves its translator.
void warm_up(DecodingScheduler& scheduler, const std::vector<std::vector<int32_t>>& sources, size_t count) {
  for (size_t i = 0; i < count; ++i) scheduler.submit(sentence_of(sources, i));
  std::vector<FinishedSentence> finished;
  while (!scheduler.idle()) scheduler.iterate(finished);
}

// One measurement on one thread: sentence i is handed to the scheduler at the first iteration that starts
// after arrivals[i] (an idle decode sleeps until then), and is translated when the iteration that finished it
// returns, its tokens read back on the host. The translator's reader thread hands lines over the same way,
// between two iterations.
ArrivalResult simulate(DecodingScheduler& scheduler, const std::vector<std::vector<int32_t>>& sources,
                       const std::vector<double>& arrivals, int target_length) {
  const size_t count = sources.size();
  std::vector<double> translated(count, 0.0);
  size_t next = 0, done = 0, target_tokens = 0, most_in_flight = 0;
  std::vector<FinishedSentence> finished;
  const Clock::time_point start = Clock::now();
  const auto since_start = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  while (done < count) {
    if (scheduler.idle()) {
      SEQTRANS_CHECK(next < count, "arrival simulation: {} of {} sentences done and none left", done, count);
      std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                std::chrono::duration<double>(arrivals[next])));
    }
    const double now = since_start();
    for (; next < count && arrivals[next] <= now; ++next) scheduler.submit(sentence_of(sources, next));
    finished.clear();
    scheduler.iterate(finished);
    const double at = since_start();
    // Those that finished were in flight during this iteration beside those still there.
    most_in_flight = std::max(most_in_flight, scheduler.in_flight() + finished.size());
    for (const FinishedSentence& sentence : finished) {
      check_forced_length(sentence.result, target_length);
      translated[sentence.id] = at;
      target_tokens += sentence.result.hypotheses.front().tokens.size();
    }
    done += finished.size();
  }
  ArrivalResult result = arrival_result(arrivals, translated, target_tokens);
  result.max_in_flight = most_in_flight;
  return result;
}

}  // namespace

void validate(const SyntheticArrivalOptions& options) {
  SEQTRANS_CHECK(options.beam >= 1, "synthetic arrivals: beam {} must be at least 1", options.beam);
  validate_shape(options.model, options.beam);
  SEQTRANS_CHECK(options.source_length >= 1 && options.target_length >= 1,
                 "synthetic arrivals: source length {} and target length {} must be at least 1", options.source_length,
                 options.target_length);
  SEQTRANS_CHECK(options.lines >= 1, "synthetic arrivals: no lines");
  SEQTRANS_CHECK(!options.rates.empty(), "synthetic arrivals: no arrival rate given");
  SEQTRANS_CHECK(!options.modes.empty(), "synthetic arrivals: no batching mode given");
  // Done sentences keeping their rows until the batch ends has no end to wait for under iteration batching.
  SEQTRANS_CHECK(options.engine.shrink_batch,
                 "synthetic arrivals: naive batching is a throughput comparison; arrivals run with finished sentences "
                 "leaving");
}

SyntheticArrivalReport run_synthetic_arrivals(const SyntheticArrivalOptions& options,
                                              const std::function<void(const std::string&)>& progress) {
  validate(options);
  SyntheticArrivalReport report;
  // A decoder-only model's prompt and output share its positions.
  report.config = synthetic_config(options.model, std::max(1024, options.source_length + options.target_length + 1));
  const ModelFile file =
      prepare_synthetic_model(report.config, options.target, options.seed);
  ModelOptions model_options = synthetic_model_options(options.target);
  const GridPoint point{static_cast<int>(options.lines), options.beam, options.source_length, options.target_length};
  const SearchOptions search = forced_length_search(point, options.engine);
  SearchOptions unused;  // forced_length_search applied the settings' search side
  apply(options.engine, model_options, unused);
  const std::unique_ptr<EngineModel> model = make_engine_model(file, model_options);
  const std::vector<std::vector<int32_t>> sources = random_sources(report.config, point, options.seed);

  for (const ArrivalBatching mode : options.modes) {
    // A scheduler per mode, as the real mode builds a translator per mode: its own pools and graphs.
    const SchedulerOptions scheduling = scheduling_for(mode, options.budget);
    DecodingScheduler scheduler(*model, search, scheduling);
    scheduler.reserve_pools();
    warm_up(scheduler, sources, std::min(sources.size(), scheduler.max_sentences()));
    for (const double rate : options.rates) {
      ArrivalResult result =
          simulate(scheduler, sources, poisson_arrivals(sources.size(), rate, options.arrival_seed), options.target_length);
      result.rate = rate;
      result.batching = mode;
      if (progress) progress(arrival_progress(result));
      report.results.push_back(result);
    }
  }
  return report;
}

}  // namespace seqtrans::bench
