// The synthetic benchmark: a random-weight Transformer of a given shape (no model file), random source
// ids, and exactly target_length generated tokens (EOS suppressed until then), over a grid of batch x
// beam x source length x target length; the protocol the peers in docs/BENCHMARKS.md were measured with.
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
#include "core/device.h"
#include "core/dtype.h"
#include "format/model_config.h"
#include "format/model_file.h"
#include "search/options.h"
#include "search/result.h"

namespace seqtrans::bench {

// The layout of a synthetic model (docs/ARCHITECTURE.md §4): Marian's post-norm with sinusoids;
// M2M-100 / NLLB-200's pre-norm with final norms and fairseq sinusoids; mBART's pre-norm with final and
// embedding norms and learned positions; Llama's decoder-only stack (RMS norms, rotary positions,
// grouped-query attention, SwiGLU, no biases), whose "source" is the prompt.
enum class SyntheticFamily { Marian, M2M100, MBart, Llama };

// Transformer-base by default (Vaswani et al.).
struct SyntheticModel {
  int encoder_layers = 6;
  int decoder_layers = 6;
  int d_model = 512;
  int heads = 8;
  int ffn = 2048;
  int vocab = 32000;  // shared source and target vocabulary, tied output layer (Llama: untied)
  int kv_heads = 0;   // Llama: key/value heads (0: as many as heads)
  SyntheticFamily family = SyntheticFamily::Marian;
};

// The shapes people run, by name: "transformer-base", "nllb-600m" (NLLB-200-distilled-600M: d 1024,
// 12 + 12 layers, 16 heads, ffn 4096, vocabulary 256,206) and "mbart-large" (mBART-50: the same widths,
// vocabulary 250,054), and the decoder-only "tinyllama-1.1b" (d 2048, 22 layers, 32 heads, 4 key/value
// heads, ffn 5632, vocabulary 32,000) and "llama2-7b" (d 4096, 32 layers, 32 heads, ffn 11008). Throws one
// line naming the presets for another name.
SyntheticModel synthetic_preset(const std::string& name);
// "marian", "m2m100" (NLLB-200 too), "mbart" or "llama"; throws for another name.
SyntheticFamily synthetic_family(const std::string& name);

// A config of that shape and family with Transformer-base conventions otherwise (lib/models/tensor_specs.h):
// EOS 0, unknown 1, pad = decoder start = vocab - 1 (suppressed), `max_positions` positions.
ModelConfig synthetic_config(const SyntheticModel& model, int max_positions);

struct SyntheticGrid {
  std::vector<int> batch = {1, 16, 64, 128};
  std::vector<int> beam = {1, 4};
  std::vector<int> source_length = {32};  // source ids per sentence, EOS included
  std::vector<int> target_length = {32};  // generated tokens per sentence, exactly
};

// Where a synthetic run's engines run and at what precision: the grid's and the arrival simulation's.
struct SyntheticTarget {
  Device device = Device::CPU;
  int device_index = 0;
  DataType dtype = DataType::F32;
  bool int8_weights = false;  // CPU: int8 products (ModelOptions::int8_weights)
  int cpu_threads = 0;        // 0 = the BLAS library's default
};

struct SyntheticOptions {
  SyntheticModel model;
  SyntheticGrid grid;
  Repetitions repetitions;
  SyntheticTarget target;
  EngineSettings engine;
  bool ablations = false;  // also measure every idea off (bench/ablations.h)
  std::vector<std::string> only_ablations;  // with ablations: just these (Ablation::name); empty: every one
  Hardware hardware;       // unknown: no floor
  uint64_t seed = 1;       // weights and source ids
};

// Throws seqtrans::Error naming the first invalid option.
void validate(const SyntheticOptions& options);

struct GridPoint {
  int batch = 1;
  int beam = 1;
  int source_length = 1;
  int target_length = 1;
};

// One grid point with the engine as configured.
struct SyntheticResult {
  GridPoint point;
  TimingSummary time;  // seconds per search of the whole batch: encoder and every decoder step
  double generated_tokens_per_second = 0;  // batch * target_length / median
  double sentences_per_second = 0;
  double seconds_per_step = 0;             // median / target_length
  PeakMemory memory;                       // peak so far in the process
  Floor floor;
  std::optional<StageProfile> profile;
  std::vector<AblationResult> ablations;   // empty unless asked for
};

struct SyntheticReport {
  ModelConfig config;
  std::vector<SyntheticResult> results;  // grid order: source length, target length, beam, batch
};

// Runs the grid. `progress` gets one line per finished grid point (may be empty).
SyntheticReport run_synthetic(const SyntheticOptions& options, const std::function<void(const std::string&)>& progress);

// What the grid and the arrival simulation (bench/synthetic_arrivals.h) share.

// The model options a synthetic run builds its engines with (the engine settings applied on top per run).
ModelOptions synthetic_model_options(const SyntheticTarget& target);

// Throws seqtrans::Error naming the first invalid field of the shape, or a vocabulary too small for beams
// of `largest_beam`.
void validate_shape(const SyntheticModel& model, int largest_beam);

// Sets the CPU threads (0: the BLAS library's default), readies the device (its allocator then grows during
// the warm-up, outside the timings) and draws random weights of `config` from `seed`.
ModelFile prepare_synthetic_model(const ModelConfig& config, const SyntheticTarget& target, uint64_t seed);

// point.batch sources of point.source_length ids (EOS included; a decoder-only model's prompts start with BOS
// instead), drawn from the ordinary tokens; the same point and seed always give the same ids.
std::vector<std::vector<int32_t>> random_sources(const ModelConfig& config, const GridPoint& point, uint64_t seed);

// The search that generates exactly point.target_length tokens at point.beam under `settings`.
SearchOptions forced_length_search(const GridPoint& point, const EngineSettings& settings);

// Throws unless the best hypothesis has exactly `target_length` tokens.
void check_forced_length(const SearchResult& result, int target_length);

}  // namespace seqtrans::bench
