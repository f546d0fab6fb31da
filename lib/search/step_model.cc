#include "search/step_model.h"

#include "ops/ops.h"
#include "search/search_common.h"

namespace seqtrans {

std::unique_ptr<DecoderState> StepModel::encode(const std::vector<std::vector<int32_t>>& sources) {
  std::unique_ptr<DecoderState> state = start();
  admit(*state, sources);
  return state;
}

void StepModel::step_candidates(DecoderState& state, const std::vector<int32_t>& input_ids,
                                const CandidateRequest& request, StepCandidates& candidates) {
  const int64_t slots = static_cast<int64_t>(input_ids.size());
  const int64_t vocab = target_vocab_size();
  const Tensor logits = host_logits(step(state, input_ids), slots, vocab);  // [slots, vocab]
  const Tensor suppressed = Tensor::from_ints({static_cast<int64_t>(request.suppressed_ids.size())}, request.suppressed_ids);
  ops::TopkOptions options;
  options.k = request.k;
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
  const Tensor logits = host_logits(step(state, input_ids), slots, target_vocab_size());  // [slots, vocab]
  const Tensor suppressed = Tensor::from_ints({static_cast<int64_t>(request.suppressed_ids.size())}, request.suppressed_ids);
  ops::SampleOptions options;
  options.suppressed_ids = request.suppressed_ids.empty() ? nullptr : &suppressed;
  Tensor ids, log_probs;
  ops::sample_tokens(logits, ops::sampling_rows_tensor(request.rows), options, ids, log_probs);
  samples.ids = ids.to_int_vector();
  samples.log_probs = log_probs.to_float_vector();
}

}  // namespace seqtrans
