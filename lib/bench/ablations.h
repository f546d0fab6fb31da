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
  bool fused_output = true;  // bias + log_softmax + top-k on the device (off: --no-fused-topk)
  ops::TopkAlgorithm topk_algorithm = ops::TopkAlgorithm::Auto;  // --no-hierarchical-topk: FullScan
  bool cuda_graphs = true;   // each decoder step replayed as one CUDA graph (off: --no-cuda-graphs)
  bool packed_encoder = true;  // joining sentences encoded without padding (off: --no-packed-encoder)
  // Small decoder steps in one persistent kernel (off: --no-persistent-decode), up to this many rows
  // (--persistent-decode-rows).
  bool persistent_decode = true;
  int64_t persistent_decode_rows = kPersistentDecodeAuto;
  // Greedy steps run several at once on CUDA, fed on the device, read together (off: --no-steps-at-once).
  bool steps_at_once = true;
  // Greedy steps in the persistent kernel run the output layer in it too (off: --no-persistent-argmax).
  bool persistent_argmax = true;

  bool operator==(const EngineSettings& other) const {
    return batching == other.batching && shrink_batch == other.shrink_batch && fused_output == other.fused_output &&
           topk_algorithm == other.topk_algorithm && cuda_graphs == other.cuda_graphs &&
           packed_encoder == other.packed_encoder && persistent_decode == other.persistent_decode &&
           persistent_decode_rows == other.persistent_decode_rows && steps_at_once == other.steps_at_once &&
           persistent_argmax == other.persistent_argmax;
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

// Every ablation relative to `base` that applies on `device` (CUDA graphs only on a GPU): each changes
// only its own switch, so an idea that `base` has already turned off is measured by turning it back on.
std::vector<Ablation> ablations(const EngineSettings& base, Device device, Workload workload);

}  // namespace seqtrans::bench
