// The arrival simulation: a file's lines arrive one by one at Poisson-distributed times (seeded) at a
// given rate, in-process, while the translator decodes; each line's latency runs from its arrival to its
// translation. Run under both batching modes, it shows what iteration-level batching buys a server.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/emitters.h"
#include "bench/measurement.h"
#include "translator.h"

namespace seqtrans::bench {

// How the sentences of an arrival measurement share the decode: the engine's two batching modes, and one
// sentence at a time (iteration-level with room for one: the server that does not batch, the baseline).
enum class ArrivalBatching { Iteration, Shrinking, OneAtATime };

// "iteration", "shrinking", "one-at-a-time": the label of the report and of the rows.
const char* arrival_batching_name(ArrivalBatching batching);
// The mode of such a name; nullopt for any other.
std::optional<ArrivalBatching> arrival_batching_named(const std::string& name);

struct ArrivalOptions {
  TranslatorOptions translator;       // batching_mode is set per measurement
  std::string input;                  // one sentence (or a decoder-only model's prompt) per line
  LineText line_text;                 // how its lines are read (empty: as they are)
  std::vector<double> rates;          // lines per second
  std::vector<Batching> modes = {Batching::Iteration, Batching::Shrinking};
  uint64_t seed = 1;                  // of the arrival times
};

struct ArrivalResult {
  double rate = 0;  // lines per second offered
  ArrivalBatching batching = ArrivalBatching::Iteration;
  size_t lines = 0;
  double seconds = 0;  // first arrival to last translation
  double target_tokens_per_s = 0;
  double latency_p50_s = 0, latency_p90_s = 0, latency_p99_s = 0;  // arrival to translated
  // The most sentences in flight at once; 0 where not observed (real mode: the translator hides its decode).
  size_t max_in_flight = 0;
};

// One measurement from each line's arrival and translation times (seconds from the same start, in line
// order) and the target tokens generated: latency percentiles, and throughput from the first arrival to the
// last translation. Rate and batching are left to the caller.
ArrivalResult arrival_result(const std::vector<double>& arrivals, const std::vector<double>& finished,
                             size_t target_tokens);

// The progress line of one measurement.
std::string arrival_progress(const ArrivalResult& result);

// Arrival times of `count` lines at `rate` per second: the partial sums of exponential gaps (a Poisson
// process), from a generator seeded with `seed`; the first line arrives after one gap.
std::vector<double> poisson_arrivals(size_t count, double rate, uint64_t seed);

// Every (rate, mode) pair over the whole file, after one untimed pass per mode (graphs recorded, pools
// sized). `progress` gets a line per measurement (may be empty).
std::vector<ArrivalResult> run_arrivals(const ArrivalOptions& options,
                                        const std::function<void(const std::string&)>& progress);

// The JSON/CSV row of one measurement: rate, batching, latency_p50_s, latency_p90_s, latency_p99_s,
// target_tokens_per_s, lines, seconds.
Row arrival_row(const ArrivalResult& result);

}  // namespace seqtrans::bench
