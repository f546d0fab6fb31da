// `seqtrans bench`: speed of a real file (-m MODEL -i FILE) or of a synthetic random-weight model over a
// grid (--synthetic), with the hardware floor, a profiled breakdown and ablations. Results go to stdout
// as tables and, for machines, to --json and --csv files.
#pragma once

#include <string>
#include <vector>

#include <CLI/CLI.hpp>

#include "common_options.h"

namespace seqtrans::app {

struct BenchOptions {
  CommonOptions common;
  CLI::App* command = nullptr;  // to ask which flags were given
  std::string input;            // real mode: the text file
  std::string output;           // real mode: where the translations go (default: discarded)
  bool synthetic = false;
  bool prefill_stall = false;  // --prefill-stall: the chunk-size measurement (bench/prefill_stall.h)

  // Synthetic model shape (Transformer-base) and grid.
  std::vector<int> layers = {6, 6};
  int d_model = 512;
  int heads = 8;
  int ffn = 2048;
  int vocab = 32000;
  int kv_heads = 0;  // decoder-only: key/value heads (0: as many as --heads)
  std::string preset;            // a named shape (bench::synthetic_preset); the shape flags override it
  std::string family = "marian";  // the layout (bench::synthetic_family); a preset sets its own
  std::vector<int> batch = {1, 16, 64, 128};
  std::vector<int> beam = {1, 4};
  std::vector<int> source_length = {32};
  std::vector<int> target_length = {32};

  int runs = 0;    // 0: the mode's default (synthetic 5, real 3)
  int warmup = -1;  // -1: the mode's default (synthetic 2, real 1)
  bool profile = false;
  bool ablations = false;
  std::vector<std::string> only_ablations;  // --ablation NAME (repeatable): just these, and implies --ablations
  bool naive_batching = false;
  bool no_fused_topk = false;
  bool no_hierarchical_topk = false;
  bool no_cuda_graphs = false;
  bool no_overlapped_launches = false;
  bool no_persistent_decode = false;
  bool no_steps_at_once = false;
  bool no_persistent_argmax = false;
  bool no_packed_weights = false;
  int64_t persistent_decode_rows = kPersistentDecodeAuto;
  bool no_packed_encoder = false;
  int64_t prefill_chunk = kPrefillChunkTokens;  // decoder-only: prompt tokens prefilled between two steps
  double peak_tflops = 0;         // 0: the measured H200 value on a GPU in fp16 (docs/BENCHMARKS.md), unknown otherwise
  double peak_bandwidth_gbs = 0;
  std::string json;
  std::string csv;
  // The arrival simulation: lines arrive at these rates (lines/s), Poisson, seeded; a real file's lines, or
  // with --synthetic this many random ones.
  std::vector<double> arrival_rates;
  uint64_t arrival_seed = 1;
  size_t arrival_lines = 1000;
  // --synthetic --arrival-rate: the batching modes it measures (iteration, shrinking, one-at-a-time); empty: all
  std::vector<std::string> arrival_batching;
};

CLI::App* add_bench_command(CLI::App& app, BenchOptions& options);
int run_bench(BenchOptions& options);

}  // namespace seqtrans::app
