// The StepModel side that every model on the row pool shares (docs/ARCHITECTURE.md §6): steps run through
// the state's StepRunner, selections through the model's OutputHead. A model adds its layers, its
// admission (an encoder, or a prefill) and its StepSource (step inputs, device work).
#pragma once

#include <vector>

#include "core/batch_invariance.h"
#include "core/overlapped_launches.h"
#include "models/engine_model.h"
#include "models/output_head.h"
#include "models/step_runner.h"

namespace seqtrans {

class PooledModel : public EngineModel, protected StepSource {
 public:
  explicit PooledModel(const ModelOptions& options) : options_(options) {}

  void release_cached(DecoderState& state) const override { runner(state).drop_graphs(); }
  Tensor step(DecoderState& state, const std::vector<int32_t>& input_ids) override;
  void step_candidates(DecoderState& state, const std::vector<int32_t>& input_ids, const CandidateRequest& request,
                       StepCandidates& candidates) override;
  void step_samples(DecoderState& state, const std::vector<int32_t>& input_ids, const SampleRequest& request,
                    StepSamples& samples) override;
  void step_candidates_run(DecoderState& state, const std::vector<int32_t>& input_ids,
                           const std::vector<CandidateRequest>& requests,
                           std::vector<StepCandidates>& candidates) override;
  int steps_per_read() const override;

 protected:
  virtual StepRunner& runner(DecoderState& state) const = 0;
  // The top layer's rows of a prepared step over `rows` rows, final norm included, op by op (step()'s full
  // logits multiply them by the output weight).
  virtual Tensor hidden_rows(DecoderState& state, int64_t rows) const = 0;
  virtual const OutputHead& output_head() const = 0;
  // The thread's modes while the model computes (admission and steps): batch-invariant arithmetic and
  // overlapped launches where the tuning asks for them. Graphs record the kernels and launches chosen under them.
  struct EngineModeScope {
    BatchInvariantScope arithmetic;
    OverlappedLaunchScope launches;
  };
  EngineModeScope engine_mode() const {
    return {BatchInvariantScope(options_.tuning.batch_invariant),
            OverlappedLaunchScope(options_.tuning.overlapped_launches)};
  }
  // Whether a state's steps may run as graphs.
  bool graphs_allowed() const { return options_.tuning.cuda_graphs && options_.tuning.fused_output; }

  ModelOptions options_;
};

}  // namespace seqtrans
