#include "search/step_model.h"

#include <algorithm>

#include "ops/ops.h"
#include "search/search_common.h"

namespace seqtrans {

std::unique_ptr<DecoderState> StepModel::encode(const std::vector<std::vector<int32_t>>& sources) {
  std::unique_ptr<DecoderState> state = start();
  admit(*state, sources);
  while (state->admitting() > 0) continue_admission(*state);
  return state;
}

void StepModel::withdraw_admitting(DecoderState& state, size_t count) {
  // Only a model that leaves sources admitting has any to withdraw, and overrides this.
  SEQTRANS_CHECK(count == 0 && state.admitting() == 0, "withdraw_admitting: {} of {} admitting sources", count,
                 state.admitting());
}

void apply_repetition_controls(Tensor& scores, const RepetitionRequest& request, const Tensor* bias) {
  const int64_t slots = scores.dim(0);
  SEQTRANS_CHECK(static_cast<int64_t>(request.histories.size()) == slots, "repetition controls: {} histories for {} slots",
                 request.histories.size(), slots);
  size_t longest = 1;
  for (const auto& history : request.histories) longest = std::max(longest, history.size());
  std::vector<int32_t> padded(static_cast<size_t>(slots) * longest, 0), lengths;
  for (int64_t slot = 0; slot < slots; ++slot) {
    const auto& history = request.histories[static_cast<size_t>(slot)];
    std::copy(history.begin(), history.end(), padded.begin() + slot * static_cast<int64_t>(longest));
    lengths.push_back(static_cast<int32_t>(history.size()));
  }
  const Device device = scores.device();
  const Tensor ids = Tensor::from_ints({slots, static_cast<int64_t>(longest)}, padded).to(device);
  const Tensor counts = Tensor::from_ints({slots}, lengths).to(device);
  ops::RepetitionOptions options;
  options.penalty = request.penalty;
  options.no_repeat_ngram = request.no_repeat_ngram;
  options.bias = bias;
  options.normalize = request.on_log_probs;
  ops::penalize_repetitions(scores, ids, counts, options);
}

void StepModel::step_candidates(DecoderState& state, const std::vector<int32_t>& input_ids,
                                const CandidateRequest& request, StepCandidates& candidates) {
  const int64_t slots = static_cast<int64_t>(input_ids.size());
  const int64_t vocab = target_vocab_size();
  Tensor logits = host_logits(step(state, input_ids), slots, vocab);  // [slots, vocab]
  if (request.repetitions.on()) apply_repetition_controls(logits, request.repetitions, nullptr);
  const Tensor suppressed = Tensor::from_ints({static_cast<int64_t>(request.suppressed_ids.size())}, request.suppressed_ids);
  ops::TopkOptions options;
  options.k = request.k;
  options.normalize = !(request.repetitions.on() && request.repetitions.on_log_probs);
  options.suppressed_ids = request.suppressed_ids.empty() ? nullptr : &suppressed;
  Tensor values, ids;
  ops::log_softmax_topk(logits, options, values, ids);
  candidates.slots = slots;
  candidates.k = request.k;
  candidates.log_probs = values.to_float_vector();
  candidates.ids = ids.to_int_vector();
}

void StepModel::step_samples(DecoderState& state, const std::vector<int32_t>& input_ids, const SampleRequest& request,
                             StepSamples& samples) {
  const int64_t slots = static_cast<int64_t>(input_ids.size());
  Tensor logits = host_logits(step(state, input_ids), slots, target_vocab_size());  // [slots, vocab]
  if (request.repetitions.on()) apply_repetition_controls(logits, request.repetitions, nullptr);
  const Tensor suppressed = Tensor::from_ints({static_cast<int64_t>(request.suppressed_ids.size())}, request.suppressed_ids);
  ops::SampleOptions options;
  options.suppressed_ids = request.suppressed_ids.empty() ? nullptr : &suppressed;
  Tensor ids, log_probs;
  ops::sample_tokens(logits, ops::sampling_rows_tensor(request.rows), options, ids, log_probs);
  samples.ids = ids.to_int_vector();
  samples.log_probs = log_probs.to_float_vector();
}

void check_run_request(const CandidateRequest& request) {
  SEQTRANS_CHECK(request.k == 1 && !request.repetitions.on(),
                 "steps run at once: each asks for the best candidate only, without repetition controls");
}

void StepModel::step_candidates_run(DecoderState& state, const std::vector<int32_t>& input_ids,
                                    const std::vector<CandidateRequest>& requests,
                                    std::vector<StepCandidates>& candidates) {
  candidates.resize(requests.size());
  std::vector<int32_t> ids = input_ids;
  for (size_t j = 0; j < requests.size(); ++j) {
    check_run_request(requests[j]);
    step_candidates(state, ids, requests[j], candidates[j]);
    ids.assign(candidates[j].ids.begin(), candidates[j].ids.end());
  }
}

}  // namespace seqtrans
