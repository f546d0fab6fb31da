#include "models/pooled_model.h"

#include <algorithm>

#include "core/batch_invariance.h"
#include "core/profiler.h"

namespace seqtrans {

Tensor PooledModel::step(DecoderState& state, const std::vector<int32_t>& input_ids) {
  const EngineModeScope mode = engine_mode();
  const int64_t rows = runner(state).prepare_step(*this, state, input_ids, /*graph=*/false);
  const Tensor x = hidden_rows(state, rows);
  row_pool(state).advance();
  const ProfileScope profile("output layer");
  Tensor result = output_head().logits_with_bias(x);
  if (result.device() != Device::CPU) result = result.to(Device::CPU);
  return result;
}

void PooledModel::step_candidates(DecoderState& state, const std::vector<int32_t>& input_ids,
                                  const CandidateRequest& request, StepCandidates& candidates) {
  const EngineModeScope mode = engine_mode();
  if (!options_.tuning.fused_output) {
    StepModel::step_candidates(state, input_ids, request, candidates);
    return;
  }
  candidates.slots = state.slots();
  candidates.k = request.k;
  runner(state).fused_step(*this, state, input_ids,
                           OutputRequest{request.k, &request.suppressed_ids, &request.repetitions, nullptr},
                           candidates.log_probs, candidates.ids);
}

void PooledModel::step_samples(DecoderState& state, const std::vector<int32_t>& input_ids,
                               const SampleRequest& request, StepSamples& samples) {
  const EngineModeScope mode = engine_mode();
  if (!options_.tuning.fused_output) {
    StepModel::step_samples(state, input_ids, request, samples);
    return;
  }
  runner(state).fused_step(*this, state, input_ids,
                           OutputRequest{kSampled, &request.suppressed_ids, &request.repetitions, &request.rows},
                           samples.log_probs, samples.ids);
}

int PooledModel::steps_per_read() const {
  const EngineTuning& tuning = options_.tuning;
  if (!tuning.fused_output) return 1;
  if (tuning.steps_per_read == kStepsPerReadAuto) return options_.device == Device::CUDA ? kGreedyStepsPerRead : 1;
  return std::max(tuning.steps_per_read, 1);
}

void PooledModel::step_candidates_run(DecoderState& state, const std::vector<int32_t>& input_ids,
                                      const std::vector<CandidateRequest>& requests,
                                      std::vector<StepCandidates>& candidates) {
  const EngineModeScope mode = engine_mode();
  if (!options_.tuning.fused_output || requests.size() <= 1) {
    StepModel::step_candidates_run(state, input_ids, requests, candidates);
    return;
  }
  runner(state).steps_at_once(*this, state, input_ids, requests, candidates);
}

}  // namespace seqtrans
