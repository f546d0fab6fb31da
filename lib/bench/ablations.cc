#include "bench/ablations.h"

#include <algorithm>

#include "core/error.h"

namespace seqtrans::bench {
namespace {

const char* topk_name(ops::TopkAlgorithm algorithm) {
  switch (algorithm) {
    case ops::TopkAlgorithm::Auto: return "auto";
    case ops::TopkAlgorithm::FullScan: return "full-scan";
    case ops::TopkAlgorithm::Hierarchical: return "hierarchical";
  }
  return "?";
}

}  // namespace

void apply(const EngineSettings& settings, ModelOptions& model, SearchOptions& search) {
  search.shrink_batch = settings.shrink_batch;
  model.tuning = settings.tuning;
}

std::string describe(const EngineSettings& settings) {
  const EngineTuning& tuning = settings.tuning;
  return std::string(settings.batching == Batching::Iteration ? "iteration-level batching, " : "") +
         (settings.shrink_batch ? "shrinking" : "naive") + " batch, " +
         (tuning.fused_output ? "fused" : "host") + " top-k (" + topk_name(tuning.topk_algorithm) + ")" +
         (tuning.cuda_graphs ? "" : ", no CUDA graphs") +
         (tuning.overlapped_launches ? "" : ", no overlapped launches") +
         (tuning.packed_encoder ? "" : ", padded encoder") +
         (tuning.persistent_decode_rows != 0 ? "" : ", no persistent decode") +
         (tuning.steps_per_read != 1 ? "" : ", greedy steps read one at a time") +
         (tuning.persistent_argmax ? "" : ", greedy output layer outside the persistent kernel") +
         (tuning.batch_invariant ? ", batch-invariant" : "") +
         (tuning.prefill_chunk_tokens == kPrefillChunkTokens ? std::string()
          : tuning.prefill_chunk_tokens == 0 ? std::string(", whole-prompt prefill")
                                             : ", prefill chunks of " + std::to_string(tuning.prefill_chunk_tokens)) +
         (tuning.packed_weights ? "" : ", weights not packed at load");
}

std::vector<Ablation> ablations(const EngineSettings& base, Device device, Workload workload, int64_t target_vocab) {
  std::vector<Ablation> list;
  if (workload == Workload::RealFile) {
    Ablation iteration{"batching shrinking", "iteration-level batching", base, base};
    iteration.with_idea.batching = Batching::Iteration;
    iteration.without_idea.batching = Batching::Shrinking;
    iteration.with_idea.shrink_batch = iteration.without_idea.shrink_batch = true;
    list.push_back(iteration);
  }
  // Naive batching keeps rows until a batch ends, so both sides batch by batch.
  Ablation naive{"naive-batching", "shrinking batch", base, base};
  naive.with_idea.shrink_batch = true;
  naive.without_idea.shrink_batch = false;
  naive.with_idea.batching = naive.without_idea.batching = Batching::Shrinking;
  list.push_back(naive);

  Ablation packed{"no-packed-encoder", "packed encoder", base, base};
  packed.with_idea.tuning.packed_encoder = true;
  packed.without_idea.tuning.packed_encoder = false;
  list.push_back(packed);

  Ablation fused{"no-fused-topk", "fused top-k", base, base};
  fused.with_idea.tuning.fused_output = true;
  fused.without_idea.tuning.fused_output = false;
  list.push_back(fused);

  // Hierarchical against a full scan, both explicit: Auto may pick either for a given shape. Left out on a
  // GPU where forcing Hierarchical could stop the run (too few groups, or too many); the CPU always scans.
  if (device != Device::CUDA || ops::hierarchical_topk_fits(target_vocab)) {
    Ablation hierarchical{"no-hierarchical-topk", "hierarchical top-k", base, base};
    hierarchical.with_idea.tuning.topk_algorithm = ops::TopkAlgorithm::Hierarchical;
    hierarchical.without_idea.tuning.topk_algorithm = ops::TopkAlgorithm::FullScan;
    hierarchical.with_idea.tuning.fused_output = hierarchical.without_idea.tuning.fused_output = true;
    list.push_back(hierarchical);
  }

  // The kernels and splits chosen per row count, against --batch-invariant: the speedup is invariance's cost.
  Ablation invariance{"batch-invariant", "kernels chosen per batch size", base, base};
  invariance.with_idea.tuning.batch_invariant = false;
  invariance.without_idea.tuning.batch_invariant = true;
  list.push_back(invariance);

  // Graphs need the fused output layer (the host top-k copies logits mid-step).
  if (device != Device::CUDA) {
    Ablation weights{"no-packed-weights", "weights packed at load", base, base};
    weights.with_idea.tuning.packed_weights = true;
    weights.without_idea.tuning.packed_weights = false;
    list.push_back(weights);
    return list;
  }
  Ablation graphs{"no-cuda-graphs", "CUDA graphs", base, base};
  graphs.with_idea.tuning.cuda_graphs = true;
  graphs.without_idea.tuning.cuda_graphs = false;
  graphs.with_idea.tuning.fused_output = graphs.without_idea.tuning.fused_output = true;
  list.push_back(graphs);

  Ablation overlapped{"no-overlapped-launches", "overlapped launches", base, base};
  overlapped.with_idea.tuning.overlapped_launches = true;
  overlapped.without_idea.tuning.overlapped_launches = false;
  list.push_back(overlapped);

  Ablation persistent{"no-persistent-decode", "persistent decode", base, base};
  if (persistent.with_idea.tuning.persistent_decode_rows == 0)
    persistent.with_idea.tuning.persistent_decode_rows = kPersistentDecodeAuto;
  persistent.without_idea.tuning.persistent_decode_rows = 0;
  list.push_back(persistent);

  // Greedy steps that the persistent kernel runs: 1.00x elsewhere.
  Ablation argmax{"no-persistent-argmax", "output layer in the persistent kernel", base, base};
  argmax.with_idea.tuning.persistent_argmax = true;
  argmax.without_idea.tuning.persistent_argmax = false;
  list.push_back(argmax);

  // Greedy search only (beam search and sampling read every step): 1.00x elsewhere.
  Ablation at_once{"no-steps-at-once", "greedy steps at once", base, base};
  if (at_once.with_idea.tuning.steps_per_read == 1) at_once.with_idea.tuning.steps_per_read = kStepsPerReadAuto;
  at_once.without_idea.tuning.steps_per_read = 1;
  at_once.with_idea.tuning.fused_output = at_once.without_idea.tuning.fused_output = true;
  list.push_back(at_once);
  return list;
}

std::vector<Ablation> select_ablations(const std::vector<Ablation>& list, const std::vector<std::string>& names) {
  const auto in_list = [&](const std::string& name) {
    return std::any_of(list.begin(), list.end(), [&](const Ablation& ablation) { return ablation.name == name; });
  };
  for (const std::string& name : names) {
    if (in_list(name)) continue;
    std::string present;
    for (const Ablation& ablation : list) present += (present.empty() ? "" : ", ") + ablation.name;
    throw Error(fmt::format("no ablation '{}' in this run (it has: {})", name, present));
  }
  if (names.empty()) return list;
  std::vector<Ablation> selected;
  for (const Ablation& ablation : list)
    if (std::find(names.begin(), names.end(), ablation.name) != names.end()) selected.push_back(ablation);
  return selected;
}

std::vector<Ablation> ablations_to_run(bool wanted, const EngineSettings& base, Device device, Workload workload,
                                       int64_t target_vocab, const std::vector<std::string>& names) {
  if (!wanted) return {};
  return select_ablations(ablations(base, device, workload, target_vocab), names);
}

std::vector<std::string> ablation_names() {
  std::vector<std::string> names;
  for (const Device device : {Device::CUDA, Device::CPU})
    for (const Ablation& ablation : ablations(EngineSettings{}, device, Workload::RealFile, 32000))
      if (std::find(names.begin(), names.end(), ablation.name) == names.end()) names.push_back(ablation.name);
  return names;
}

}  // namespace seqtrans::bench
