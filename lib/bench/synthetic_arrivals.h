// The arrival simulation at a model shape, with no model file or tokenizer (`seqtrans bench --synthetic
// --arrival-rate`): random weights of a synthetic shape (bench/synthetic.h), random sources or prompts of
// one length, each generating exactly target_length tokens, arriving one by one at Poisson times into the
// engine's decoding scheduler. Each rate runs under iteration-level batching, batch-level (shrinking)
// batching and one sentence at a time: what a server gains by batching at all, and by batching per step.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "bench/ablations.h"
#include "bench/arrivals.h"
#include "bench/synthetic.h"
#include "core/device.h"
#include "core/dtype.h"
#include "format/model_config.h"
#include "scheduler/decoding_scheduler.h"

namespace seqtrans::bench {

struct SyntheticArrivalOptions {
  SyntheticModel model;
  SyntheticTarget target;
  EngineSettings engine;      // the engine's switches; its batching is set per measurement
  // Iteration and shrinking batching: the sentences and source tokens in flight, and min_join (the
  // translator's, scheduler_options()); one at a time has room for one sentence. The mode is set per
  // measurement.
  SchedulerOptions budget;
  int beam = 1;
  int source_length = 32;  // ids per source (EOS included) or prompt (BOS included)
  int target_length = 32;  // generated tokens per sentence, exactly
  size_t lines = 1000;     // sentences per measurement
  std::vector<double> rates;  // lines per second
  std::vector<ArrivalBatching> modes = {ArrivalBatching::Iteration, ArrivalBatching::Shrinking,
                                        ArrivalBatching::OneAtATime};
  uint64_t seed = 1;          // weights and sources
  uint64_t arrival_seed = 1;  // arrival times (poisson_arrivals)
};

struct SyntheticArrivalReport {
  ModelConfig config;
  std::vector<ArrivalResult> results;  // by mode in the options' order, each mode's rates in order
};

// Throws seqtrans::Error naming the first invalid option.
void validate(const SyntheticArrivalOptions& options);

// Every (mode, rate) pair over the same sentences, after one untimed pass per mode of a full budget of
// them (pools sized, the full row count's graph recorded). `progress` gets a line per measurement (may be
// empty).
SyntheticArrivalReport run_synthetic_arrivals(const SyntheticArrivalOptions& options,
                                              const std::function<void(const std::string&)>& progress);

}  // namespace seqtrans::bench
