#include "bench/arrivals.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <memory>
#include <random>
#include <thread>

#include <fmt/format.h>

#include "batching/line_reader.h"
#include "bench/statistics.h"
#include "core/error.h"

namespace seqtrans::bench {
namespace {

using Clock = std::chrono::steady_clock;

std::vector<Line> read_lines(const std::string& path, const LineText& line_text) {
  LineReader reader = LineReader::open(path, 4096);
  std::vector<Line> lines;
  for (std::vector<Line> window = reader.read_window(); !window.empty(); window = reader.read_window())
    std::move(window.begin(), window.end(), std::back_inserter(lines));
  if (line_text)
    for (Line& line : lines) line.text = line_text(line.text, line.index);
  return lines;
}

// Feeds `lines` to the translator at their arrival times: the reader thread sleeps until the next line is
// due and hands over every line that is due by then.
ArrivalResult simulate(Translator& translator, const std::vector<Line>& lines, const std::vector<double>& arrivals) {
  const TranslationStats before = translator.stats();
  std::vector<double> finished(lines.size(), 0.0);
  size_t next = 0, translated = 0;
  const Clock::time_point start = Clock::now();
  const auto since_start = [&] { return std::chrono::duration<double>(Clock::now() - start).count(); };
  translator.translate_stream(
      [&] {
        std::vector<Line> due;
        if (next == lines.size()) return due;
        std::this_thread::sleep_until(start + std::chrono::duration_cast<Clock::duration>(
                                                  std::chrono::duration<double>(arrivals[next])));
        const double now = since_start();
        while (next < lines.size() && arrivals[next] <= now) due.push_back(lines[next++]);
        return due;
      },
      [&](const Line&, Translation&) { finished[translated++] = since_start(); });
  SEQTRANS_CHECK(translated == lines.size(), "arrival simulation: {} of {} lines translated", translated, lines.size());
  return arrival_result(arrivals, finished, translator.stats().target_tokens - before.target_tokens);
}

}  // namespace

const char* arrival_batching_name(ArrivalBatching batching) {
  switch (batching) {
    case ArrivalBatching::Iteration: return "iteration";
    case ArrivalBatching::Shrinking: return "shrinking";
    case ArrivalBatching::OneAtATime: return "one-at-a-time";
  }
  return "?";
}

std::optional<ArrivalBatching> arrival_batching_named(const std::string& name) {
  for (const ArrivalBatching mode : {ArrivalBatching::Iteration, ArrivalBatching::Shrinking, ArrivalBatching::OneAtATime})
    if (name == arrival_batching_name(mode)) return mode;
  return std::nullopt;
}

ArrivalResult arrival_result(const std::vector<double>& arrivals, const std::vector<double>& finished,
                             size_t target_tokens) {
  SEQTRANS_CHECK(!arrivals.empty() && finished.size() == arrivals.size(),
                 "arrival simulation: {} translation times for {} arrivals", finished.size(), arrivals.size());
  ArrivalResult result;
  result.lines = arrivals.size();
  // The latest translation, whichever line it is: the last line's where translations come back in input
  // order (real mode), which the synthetic mode's scheduler does not promise.
  result.seconds = *std::max_element(finished.begin(), finished.end()) - arrivals.front();
  std::vector<double> latencies(arrivals.size());
  for (size_t i = 0; i < arrivals.size(); ++i) latencies[i] = finished[i] - arrivals[i];
  result.latency_p50_s = percentile(latencies, 50);
  result.latency_p90_s = percentile(latencies, 90);
  result.latency_p99_s = percentile(latencies, 99);
  result.target_tokens_per_s = result.seconds > 0 ? static_cast<double>(target_tokens) / result.seconds : 0.0;
  return result;
}

std::string arrival_progress(const ArrivalResult& result) {
  return fmt::format("{} lines/s, {} batching: p50 {:.3f} s, p99 {:.3f} s, {:.0f} target tokens/s", result.rate,
                     arrival_batching_name(result.batching), result.latency_p50_s, result.latency_p99_s,
                     result.target_tokens_per_s);
}

std::vector<double> poisson_arrivals(size_t count, double rate, uint64_t seed) {
  SEQTRANS_CHECK(rate > 0, "arrival rate must be positive, got {}", rate);
  std::mt19937_64 generator(seed);
  std::vector<double> times(count);
  double time = 0.0;
  for (double& arrival : times) {
    // -log(1 - u) / rate with u in [0, 1) from 53 bits: an exponential gap, fixed by this code.
    const double unit = static_cast<double>(generator() >> 11) * (1.0 / 9007199254740992.0);
    time += -std::log1p(-unit) / rate;
    arrival = time;
  }
  return times;
}

std::vector<ArrivalResult> run_arrivals(const ArrivalOptions& options,
                                        const std::function<void(const std::string&)>& progress) {
  const std::vector<Line> lines = read_lines(options.input, options.line_text);
  SEQTRANS_CHECK(!lines.empty(), "benchmark: '{}' has no lines", options.input);
  std::vector<ArrivalResult> results;
  for (const Batching mode : options.modes) {
    TranslatorOptions translator_options = options.translator;
    translator_options.batching_mode = mode;
    Translator translator(translator_options);
    translator.translate(lines);  // untimed: pools sized, graphs recorded
    for (const double rate : options.rates) {
      ArrivalResult result = simulate(translator, lines, poisson_arrivals(lines.size(), rate, options.seed));
      result.rate = rate;
      result.batching = mode == Batching::Iteration ? ArrivalBatching::Iteration : ArrivalBatching::Shrinking;
      if (progress) progress(arrival_progress(result));
      results.push_back(result);
    }
  }
  return results;
}

Row arrival_row(const ArrivalResult& result) {
  return {{"rate", result.rate},
          {"batching", std::string(arrival_batching_name(result.batching))},
          {"latency_p50_s", result.latency_p50_s},
          {"latency_p90_s", result.latency_p90_s},
          {"latency_p99_s", result.latency_p99_s},
          {"target_tokens_per_s", result.target_tokens_per_s},
          {"lines", static_cast<int64_t>(result.lines)},
          {"seconds", result.seconds}};
}

}  // namespace seqtrans::bench
