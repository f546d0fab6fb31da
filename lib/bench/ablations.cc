#include "bench/ablations.h"

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
  model.fused_output = settings.fused_output;
  model.topk_algorithm = settings.topk_algorithm;
  model.cuda_graphs = settings.cuda_graphs;
  model.packed_encoder = settings.packed_encoder;
  model.persistent_decode_rows = settings.persistent_decode ? settings.persistent_decode_rows : 0;
  model.steps_per_read = settings.steps_at_once ? kStepsPerReadAuto : 1;
  model.persistent_argmax = settings.persistent_argmax;
}

std::string describe(const EngineSettings& settings) {
  return std::string(settings.batching == Batching::Iteration ? "iteration-level batching, " : "") +
         (settings.shrink_batch ? "shrinking" : "naive") + " batch, " +
         (settings.fused_output ? "fused" : "host") + " top-k (" + topk_name(settings.topk_algorithm) + ")" +
         (settings.cuda_graphs ? "" : ", no CUDA graphs") + (settings.packed_encoder ? "" : ", padded encoder") +
         (settings.persistent_decode ? "" : ", no persistent decode") +
         (settings.steps_at_once ? "" : ", greedy steps read one at a time") +
         (settings.persistent_argmax ? "" : ", greedy output layer outside the persistent kernel");
}

std::vector<Ablation> ablations(const EngineSettings& base, Device device, Workload workload) {
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
  packed.with_idea.packed_encoder = true;
  packed.without_idea.packed_encoder = false;
  list.push_back(packed);

  Ablation fused{"no-fused-topk", "fused top-k", base, base};
  fused.with_idea.fused_output = true;
  fused.without_idea.fused_output = false;
  list.push_back(fused);

  // Hierarchical against a full scan, both explicit: Auto may pick either for a given shape.
  Ablation hierarchical{"no-hierarchical-topk", "hierarchical top-k", base, base};
  hierarchical.with_idea.topk_algorithm = ops::TopkAlgorithm::Hierarchical;
  hierarchical.without_idea.topk_algorithm = ops::TopkAlgorithm::FullScan;
  hierarchical.with_idea.fused_output = hierarchical.without_idea.fused_output = true;
  list.push_back(hierarchical);

  // Graphs need the fused output layer (the host top-k copies logits mid-step).
  if (device != Device::CUDA) return list;
  Ablation graphs{"no-cuda-graphs", "CUDA graphs", base, base};
  graphs.with_idea.cuda_graphs = true;
  graphs.without_idea.cuda_graphs = false;
  graphs.with_idea.fused_output = graphs.without_idea.fused_output = true;
  list.push_back(graphs);

  Ablation persistent{"no-persistent-decode", "persistent decode", base, base};
  persistent.with_idea.persistent_decode = true;
  persistent.without_idea.persistent_decode = false;
  list.push_back(persistent);

  // Greedy steps that the persistent kernel runs: 1.00x elsewhere.
  Ablation argmax{"no-persistent-argmax", "output layer in the persistent kernel", base, base};
  argmax.with_idea.persistent_argmax = true;
  argmax.without_idea.persistent_argmax = false;
  list.push_back(argmax);

  // Greedy search only (beam search and sampling read every step): 1.00x elsewhere.
  Ablation at_once{"no-steps-at-once", "greedy steps at once", base, base};
  at_once.with_idea.steps_at_once = true;
  at_once.without_idea.steps_at_once = false;
  at_once.with_idea.fused_output = at_once.without_idea.fused_output = true;
  list.push_back(at_once);
  return list;
}

}  // namespace seqtrans::bench
