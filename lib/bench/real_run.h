// The real benchmark: a text file through the translator exactly as `seqtrans translate` runs it
// (tokenize, batch, encode, search, detokenize), timed end to end over repeated runs.
#pragma once

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "bench/ablations.h"
#include "bench/cost_model.h"
#include "bench/measurement.h"
#include "bench/memory.h"
#include "batching/line_reader.h"
#include "translator_group.h"

namespace seqtrans::bench {

struct RealOptions {
  TranslatorOptions translator;  // model, device, precision, search and batching as `translate` takes them
  std::vector<int> device_indices = {0};  // one engine per device (translator_group.h)
  std::string input;             // the text file, one sentence per line
  LineText line_text;            // how its lines are read (empty: as they are)
  Repetitions repetitions = {3, 1, false};
  EngineSettings engine;
  bool ablations = false;
  std::vector<std::string> only_ablations;  // with ablations: just these (Ablation::name); empty: every one
  Hardware hardware;
};

// One engine's part of a run (a group of several GPUs has one engine each).
struct EngineShare {
  int device_index = 0;
  size_t sentences = 0;
  double seconds = 0;         // from the run's start to the engine's last line
  double search_seconds = 0;  // of which searching (encoder, decoder steps, bookkeeping)
};

// One run of the whole file, as the translator counted it.
struct RealRun {
  double seconds = 0;  // wall time of all translate() calls
  TranslationStats stats;  // summed over the engines
  std::vector<EngineShare> engines;
};

// The file under one engine setting.
struct RealResult {
  TimingSummary time;  // seconds per pass over the file
  RealRun median_run;  // the timed run with the median time: counts and per-line latencies
  double sentences_per_second = 0;
  double source_tokens_per_second = 0;
  double target_tokens_per_second = 0;
  // Seconds per line from being read to being translated (the whole file is read at once, so this is
  // mostly time spent waiting behind earlier lines).
  double latency_p50 = 0, latency_p90 = 0, latency_p99 = 0;
  // Wall time outside tokenize, search and detokenize: batching, reordering, host gaps (with several
  // engines, each engine's time to its last line, summed, like the other times in stats).
  double other_host_seconds = 0;
  PeakMemory memory;
  // Start-up, as a one-line `translate` sees it: loading the model and preparing the device (the first
  // translator), then translating the file's first line alone on it, before any other pass.
  double startup_seconds = 0;
  StartupTimes startup;  // the first translator's construction, by phase
  double first_line_seconds = 0;
  Floor floor;  // a lower bound from the run's totals (cost_model.h: run_totals_cost)
  std::optional<StageProfile> profile;
  std::vector<AblationResult> ablations;
};

struct RealReport {
  ModelConfig config;
  SearchOptions search;  // in effect: the caller's, with the model file's generation defaults applied
  size_t lines = 0;
  RealResult result;
  std::vector<Translation> translations;  // of the last timed run, in input order
};

// Reads `input` in the translator's read-ahead windows, then times the runs. `progress` gets a line per
// measured configuration (may be empty).
RealReport run_real(const RealOptions& options, const std::function<void(const std::string&)>& progress);

}  // namespace seqtrans::bench
