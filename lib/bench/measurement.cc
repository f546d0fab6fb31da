#include "bench/measurement.h"

#include <algorithm>
#include <cstring>
#include <iterator>

#include "core/profiler.h"
#include "ops/ops.h"

namespace seqtrans::bench {

std::vector<double> time_runs(const Repetitions& repetitions, const std::function<double()>& run) {
  for (int i = 0; i < repetitions.warmup; ++i) run();
  std::vector<double> seconds;
  for (int i = 0; i < repetitions.runs; ++i) seconds.push_back(run());
  return seconds;
}

std::pair<std::vector<double>, std::vector<double>> time_interleaved(const Repetitions& repetitions,
                                                                     const std::function<double()>& first,
                                                                     const std::function<double()>& second) {
  for (int i = 0; i < repetitions.warmup; ++i) {
    first();
    second();
  }
  std::pair<std::vector<double>, std::vector<double>> seconds;
  for (int i = 0; i < repetitions.runs; ++i) {
    seconds.first.push_back(first());
    seconds.second.push_back(second());
  }
  return seconds;
}

double StageProfile::unaccounted() const {
  double staged = 0;
  for (const auto& [name, seconds] : stages) staged += seconds;
  return search_seconds - staged;
}

const std::vector<std::string>& profile_stage_names() {
  // Beam reorders move no cache rows (the history table is gathered inside the step): no stage of their own.
  static const std::vector<std::string> names = {"encoder",       "gemm",         "attention",          "other kernels",
                                                 "persistent decoder", "output layer", "other stages"};
  return names;
}

namespace {

// The persistent kernel's stages in the order it runs them.
std::vector<std::string> persistent_stage_order() {
  std::vector<std::string> order(std::begin(ops::kPersistentDecoderPhaseNames), std::end(ops::kPersistentDecoderPhaseNames));
  order.emplace_back(ops::kPersistentDecoderFinalPhase);
  order.emplace_back(ops::kPersistentDecoderFinalOutputPhase);
  order.emplace_back(ops::kPersistentDecoderLaunchPhase);
  return order;
}

}  // namespace

StageProfile profile_run(const std::function<double(double& seconds)>& run) {
  Profiler& profiler = Profiler::instance();
  profiler.reset();
  profiler.enable(true);
  StageProfile profile;
  try {
    profile.search_seconds = run(profile.seconds);
  } catch (...) {
    profiler.enable(false);
    throw;
  }
  profiler.enable(false);

  const std::vector<std::string>& names = profile_stage_names();
  for (const std::string& name : names) profile.stages.emplace_back(name, 0.0);
  for (const auto& [stage, seconds] : profiler.stages()) {
    // The persistent kernel records each phase as "persistent: <phase>".
    const bool phase = stage.rfind(ops::kPersistentDecoderStagePrefix, 0) == 0;
    const auto known = std::find(names.begin(), names.end() - 1, phase ? std::string("persistent decoder") : stage);
    profile.stages[static_cast<size_t>(known - names.begin())].second += seconds;
  }
  for (const std::string& stage : persistent_stage_order()) {
    const auto seconds = profiler.stages().find(stage);
    if (seconds == profiler.stages().end()) continue;
    profile.persistent_phases.push_back(
        {stage.substr(std::strlen(ops::kPersistentDecoderStagePrefix)), seconds->second, profiler.counts().at(stage)});
  }
  profiler.reset();
  return profile;
}

}  // namespace seqtrans::bench
