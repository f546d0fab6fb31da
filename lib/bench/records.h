// The benchmark's results as flat rows (one schema per mode) and the JSON document around them; the CSV
// file is the same rows (bench/emitters.h).
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include "bench/emitters.h"
#include "bench/real_run.h"
#include "bench/synthetic.h"

namespace seqtrans::bench {

// What was run, for the JSON header.
struct RunDescription {
  std::string mode;    // "synthetic" or "real"
  std::string device;  // "cpu", "cuda:0"
  DataType dtype = DataType::F32;
  bool int8_weights = false;  // CPU --precision int8
  Hardware hardware;
  std::string hardware_source;  // where the peak rates came from, e.g. "measured on an H200"
  EngineSettings engine;
  Repetitions repetitions;
  std::string input;  // real mode: the file
  std::string model;  // real mode: the model file
};

// One row per grid point: the point, timings, throughput, memory, the floor and "x of floor", the
// profiled stages when profiled, and each ablation's speedup when ablations ran.
Row synthetic_row(const SyntheticResult& result);
std::vector<Row> synthetic_ablation_rows(const SyntheticResult& result);

// The single row of a real run, and its ablations.
Row real_row(const RealReport& report);
std::vector<Row> real_ablation_rows(const RealReport& report);

// Architecture fields and the parameter count.
Row model_row(const ModelConfig& config);

// {"seqtrans": version, "run": {...}, "model": {...}, "results": [...], "ablations": [...]}.
void write_json(std::ostream& out, const RunDescription& run, const ModelConfig& config, const std::vector<Row>& results,
                const std::vector<Row>& ablation_rows, const std::vector<Row>& arrival_rows = {});

}  // namespace seqtrans::bench
