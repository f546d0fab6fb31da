// Repeated timing and the profiled breakdown of a run, shared by the synthetic and real benchmarks.
#pragma once

#include <functional>
#include <string>
#include <utility>
#include <vector>

#include "bench/statistics.h"

namespace seqtrans::bench {

// How a real run's input line becomes the text the engine reads: `seqtrans generate`'s escapes for a
// decoder-only model's prompts (app/prompt_text.h); empty: the line as it is.
using LineText = std::function<std::string(const std::string& line, size_t index)>;

struct Repetitions {
  int runs = 5;    // timed runs; the median is reported
  int warmup = 2;  // untimed runs first (kernel loading, allocator growth, caches)
  bool profile = false;  // one more run with the stage profiler on, reported apart
};

// Runs `run` repetitions.warmup times, then repetitions.runs times, and returns the seconds each timed
// run reported (`run` times itself, so it can leave set-up out).
std::vector<double> time_runs(const Repetitions& repetitions, const std::function<double()>& run);

// Two configurations timed alternately (first, second, first, ...) after the warm-up runs of each, so
// that drift in clocks, caches or machine load falls on both alike. Returns each one's timed seconds.
std::pair<std::vector<double>, std::vector<double>> time_interleaved(const Repetitions& repetitions,
                                                                     const std::function<double()>& first,
                                                                     const std::function<double()>& second);

// Where the time of one profiled run went. On a GPU every stage synchronizes, so `seconds` is slower
// than an unprofiled run.
struct StageProfile {
  double seconds = 0;                                  // wall time of the profiled run
  double search_seconds = 0;                           // the part the stages below live in
  std::vector<std::pair<std::string, double>> stages;  // profile_stage_names() order, seconds each
  // Inside "persistent decoder": the kernel's phases in its order (ops::kPersistentDecoderPhaseNames, the final
  // norm, then the launch and return), each summed over the run's steps and layers.
  struct Phase {
    std::string name;  // without the "persistent: " prefix
    double seconds = 0;
    int64_t count = 0;  // times it ran: steps x layers, or steps for the last two
  };
  std::vector<Phase> persistent_phases;
  // search_seconds - sum of stages: search bookkeeping on the host and gaps between device work.
  double unaccounted() const;
};

// The profiler's stages (lib/core/profiler.h) in report order; stages the code records under any other
// name are summed into the last one, "other stages".
const std::vector<std::string>& profile_stage_names();

// Runs `run` once with the profiler on. `run` returns the search seconds of the run, and `seconds` is
// its wall time.
StageProfile profile_run(const std::function<double(double& seconds)>& run);

// One idea's gain on a workload: the same runs with the idea and without it.
struct AblationResult {
  std::string name;  // the flag that turns the idea off, without dashes
  std::string idea;
  TimingSummary with_idea;
  TimingSummary without_idea;
  double speedup() const { return without_idea.median / with_idea.median; }
};

}  // namespace seqtrans::bench
