// The ideas `seqtrans bench` can turn off, and the ablations that measure each one's gain.
#pragma once

#include <string>
#include <vector>

#include "models/encoder_decoder_model.h"
#include "scheduler/decoding_scheduler.h"
#include "search/options.h"

namespace seqtrans::bench {

// The engine switches the benchmark varies; the defaults are the engine as built.
struct EngineSettings {
  // Real mode: sentences join the running decode at any step (off: --batching shrinking). The synthetic
  // grid runs one batch of equal sentences, where both modes do the same work.
  Batching batching = Batching::Iteration;
  bool shrink_batch = true;  // finished sentences leave the batch (off: --naive-batching, batch-level only)
  // The engine's switches (--no-fused-topk, --no-hierarchical-topk, --no-cuda-graphs, --no-overlapped-launches,
  // --no-packed-encoder, --no-persistent-decode and --persistent-decode-rows, --no-steps-at-once,
  // --no-persistent-argmax, --no-packed-weights).
  EngineTuning tuning;

  bool operator==(const EngineSettings& other) const {
    return batching == other.batching && shrink_batch == other.shrink_batch && tuning == other.tuning;
  }
};

void apply(const EngineSettings& settings, ModelOptions& model, SearchOptions& search);

// "shrinking batch, fused top-k (auto)": the settings in words, for reports.
std::string describe(const EngineSettings& settings);

// One idea measured against the same workload with it and without it; speedup = time without / time with.
struct Ablation {
  std::string name;  // the flag that turns the idea off, without dashes: "naive-batching"
  std::string idea;  // what is measured: "shrinking batch"
  EngineSettings with_idea;
  EngineSettings without_idea;
};

// Where an ablation runs: the batching ablation needs a stream of sentences (real mode).
enum class Workload { RealFile, SyntheticBatch };

// Every ablation relative to `base` that applies on `device` (CUDA graphs only on a GPU) and to the model's
// target vocabulary (the hierarchical top-k only where it can be forced): each changes only its own switch,
// so an idea that `base` has already turned off is measured by turning it back on.
std::vector<Ablation> ablations(const EngineSettings& base, Device device, Workload workload, int64_t target_vocab);

// The ablations of `list` that `names` asks for (Ablation::name, as `bench --ablation` takes it), in the list's
// order; all of them when `names` is empty. A name the list lacks is an error naming those it has.
std::vector<Ablation> select_ablations(const std::vector<Ablation>& list, const std::vector<std::string>& names);

// What a run measures: none unless `wanted` (bench --ablations or --ablation), else the ablations of `base` on
// this device, workload and vocabulary that `names` asks for (select_ablations). Called before the run's first
// point, so that a name the run lacks stops it at once.
std::vector<Ablation> ablations_to_run(bool wanted, const EngineSettings& base, Device device, Workload workload,
                                       int64_t target_vocab, const std::vector<std::string>& names);

// Every name an ablation may have on some device and workload: what `bench --ablation` accepts.
std::vector<std::string> ablation_names();

}  // namespace seqtrans::bench
