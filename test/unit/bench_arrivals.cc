// The arrival simulation at a synthetic shape on the CPU: every line comes back, the figures agree with
// each other and with the forced lengths, and one at a time keeps one sentence in flight (never a speed
// assertion: benchmarks are not tests).
#include "bench/synthetic_arrivals.h"

#include <algorithm>
#include <sstream>

#include "bench/emitters.h"
#include "catch.h"
#include "core/error.h"

namespace seqtrans::bench {
namespace {

constexpr size_t kLines = 30;
// A rate the tiny models keep up with, and one at which every line has arrived before the first is done,
// so that the batching modes differ: the queue is full at once.
const std::vector<double> kRates = {300.0, 1e5};

SyntheticArrivalOptions tiny_llama() {
  SyntheticArrivalOptions options;
  options.model = {0, 2, 64, 4, 128, 500, 2, SyntheticFamily::Llama};  // grouped-query: 4 heads, 2 key/value
  options.beam = 1;
  options.source_length = 8;
  options.target_length = 6;
  options.lines = kLines;
  options.rates = kRates;
  options.budget.max_sentences = 8;
  options.budget.min_join = 2;
  return options;
}

SyntheticArrivalOptions tiny_encoder_decoder() {
  SyntheticArrivalOptions options = tiny_llama();
  options.model = {1, 1, 32, 4, 64, 100, 0, SyntheticFamily::M2M100};
  options.beam = 2;  // a sentence's rows are its beams: the budget counts sentences
  return options;
}

void check_report(const SyntheticArrivalOptions& options, const SyntheticArrivalReport& report) {
  const std::vector<ArrivalBatching> modes = {ArrivalBatching::Iteration, ArrivalBatching::Shrinking,
                                              ArrivalBatching::OneAtATime};
  REQUIRE(report.results.size() == modes.size() * kRates.size());
  for (size_t i = 0; i < report.results.size(); ++i) {
    const ArrivalResult& result = report.results[i];
    INFO(arrival_progress(result));
    CHECK(result.batching == modes[i / kRates.size()]);
    CHECK(result.rate == kRates[i % kRates.size()]);
    CHECK(result.lines == kLines);
    // A line is handed over at its arrival at the earliest, so none is translated before it arrives, and
    // the last arrives after the first by the span of the arrival times.
    CHECK(result.latency_p50_s >= 0);
    CHECK(result.latency_p50_s <= result.latency_p90_s);
    CHECK(result.latency_p90_s <= result.latency_p99_s);
    const std::vector<double> arrivals = poisson_arrivals(kLines, result.rate, options.arrival_seed);
    CHECK(result.seconds >= arrivals.back() - arrivals.front());
    // Every line generated exactly the forced length.
    CHECK(result.target_tokens_per_s ==
          Approx(static_cast<double>(kLines * options.target_length) / result.seconds).epsilon(1e-9));
    CHECK(result.max_in_flight >= 1);
    CHECK(result.max_in_flight <= options.budget.max_sentences);
    if (result.batching == ArrivalBatching::OneAtATime) CHECK(result.max_in_flight == 1);
    // All lines waiting at once: the batching modes take several.
    if (result.rate == kRates.back() && result.batching != ArrivalBatching::OneAtATime) CHECK(result.max_in_flight > 1);
  }
}

}  // namespace

TEST_CASE("bench synthetic arrivals: a tiny decoder-only shape completes every line in each mode", "[bench]") {
  const SyntheticArrivalOptions options = tiny_llama();
  std::vector<std::string> progress;
  const SyntheticArrivalReport report =
      run_synthetic_arrivals(options, [&](const std::string& line) { progress.push_back(line); });
  CHECK(report.config.kind == ModelKind::DecoderOnly);
  CHECK(progress.size() == report.results.size());
  check_report(options, report);
}

TEST_CASE("bench synthetic arrivals: a tiny encoder-decoder shape with beams completes every line", "[bench]") {
  const SyntheticArrivalOptions options = tiny_encoder_decoder();
  const SyntheticArrivalReport report = run_synthetic_arrivals(options, {});
  CHECK(report.config.kind == ModelKind::EncoderDecoder);
  check_report(options, report);
}

TEST_CASE("bench synthetic arrivals: rows name the batching, one at a time apart from iteration", "[bench]") {
  SyntheticArrivalOptions options = tiny_llama();
  options.lines = 4;
  options.rates = {1000.0};
  options.modes = {ArrivalBatching::Iteration, ArrivalBatching::OneAtATime};
  const SyntheticArrivalReport report = run_synthetic_arrivals(options, {});
  std::vector<Row> rows;
  for (const ArrivalResult& result : report.results) rows.push_back(arrival_row(result));
  std::ostringstream csv;
  write_csv(csv, rows);
  CHECK(csv.str().rfind("rate,batching,latency_p50_s,latency_p90_s,latency_p99_s,target_tokens_per_s,lines,seconds\n"
                        "1000,iteration,",
                        0) == 0);
  CHECK(csv.str().find("\n1000,one-at-a-time,") != std::string::npos);
}

TEST_CASE("poisson arrivals: the same seed gives the same times, increasing, at the rate asked", "[bench]") {
  const std::vector<double> first = poisson_arrivals(10000, 50.0, 7);
  CHECK(first == poisson_arrivals(10000, 50.0, 7));
  CHECK(first != poisson_arrivals(10000, 50.0, 8));
  CHECK(first.front() > 0);
  CHECK(std::adjacent_find(first.begin(), first.end(), [](double a, double b) { return b <= a; }) == first.end());
  // The mean gap of 10,000 exponential gaps is 1 / rate within a few percent (its standard error is 1%).
  CHECK(first.back() / 10000.0 == Approx(1.0 / 50.0).epsilon(0.05));
  CHECK_THROWS_AS(poisson_arrivals(3, 0.0, 1), Error);
}

TEST_CASE("bench synthetic arrivals: options that make no sense are one-line errors", "[bench]") {
  SyntheticArrivalOptions options = tiny_llama();
  options.lines = 0;
  CHECK_THROWS_AS(run_synthetic_arrivals(options, {}), Error);
  options = tiny_llama();
  options.rates = {};
  CHECK_THROWS_AS(run_synthetic_arrivals(options, {}), Error);
  options = tiny_llama();
  options.engine.shrink_batch = false;  // naive batching has no end of a batch under iteration batching
  CHECK_THROWS_AS(run_synthetic_arrivals(options, {}), Error);
  options = tiny_llama();
  options.model.vocab = 5;
  options.beam = 4;  // needs 2 x 4 + 2 ids
  CHECK_THROWS_AS(run_synthetic_arrivals(options, {}), Error);
}

}  // namespace seqtrans::bench
