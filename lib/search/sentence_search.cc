#include "search/sentence_search.h"

#include <algorithm>

#include "ops/ops.h"
#include "search/beam_search.h"
#include "search/greedy.h"
#include "search/group_beam_search.h"
#include "search/sampling.h"
#include "search/search.h"
#include "search/search_common.h"

namespace seqtrans {

StepPlan step_plan(const StepModel& model, const SearchOptions& options) {
  switch (search_kind(options)) {
    case SearchKind::Greedy:
      return {false, 1};
    case SearchKind::Beam: {
      // The global best 2 * beam_size over beam x vocab are always among each row's best 2 * beam_size.
      const int k = options.beam_groups > 1 ? group_beam_candidates(options) : 2 * options.beam_size;
      return {false, static_cast<int>(std::min<int64_t>(k, model.target_vocab_size()))};
    }
    case SearchKind::Sampling:
      return {true, 0};
  }
  return {};
}

ops::SamplingRow sampling_base(const SearchOptions& options) {
  ops::SamplingRow row;
  row.temperature = options.temperature;
  row.top_k = options.sampling_topk;
  row.top_p = options.sampling_topp;
  row.min_p = options.sampling_minp;
  row.seed_low = static_cast<uint32_t>(options.seed);
  row.seed_high = static_cast<uint32_t>(options.seed >> 32);
  return row;
}

void SentenceSearch::add_draws(const ops::SamplingRow& /*base*/, std::vector<ops::SamplingRow>& /*rows*/) const {
  throw Error("this search draws no samples");
}

CandidateRequest candidate_request(const StepModel& model, const StepPlan& plan, const std::vector<char>& banned) {
  CandidateRequest request{plan.k, suppressed_without_eos(model), {}};
  const size_t banning = static_cast<size_t>(std::count(banned.begin(), banned.end(), 1));
  if (banning == 0) return request;
  if (banning == banned.size()) {
    request.suppressed_ids.push_back(model.eos_id());
    return request;
  }
  request.k = static_cast<int>(std::min<int64_t>({static_cast<int64_t>(plan.k) + 1, model.target_vocab_size(),
                                                  static_cast<int64_t>(ops::kMaxDeviceTopk)}));
  return request;
}

std::unique_ptr<SentenceSearch> make_sentence_search(const StepModel& model, const SearchOptions& options,
                                                     size_t source_length, uint64_t sentence_id,
                                                     const ForcedStart& start) {
  const int max_generated = max_generated_length(model, options, source_length);
  for (int32_t id : start.ids)
    SEQTRANS_CHECK(id >= 0 && id < model.target_vocab_size() && id != model.eos_id(),
                   "target prefix id {} is EOS or outside the vocabulary of {}", id, model.target_vocab_size());
  SEQTRANS_CHECK(start.generated <= start.ids.size(), "forced start: {} generated of {} ids", start.generated,
                 start.ids.size());
  const int prompt = static_cast<int>(start.ids.size() - start.generated);
  const SentenceLimits limits{max_generated + prompt, options.min_length + prompt, start.ids, prompt};
  switch (search_kind(options)) {
    case SearchKind::Greedy:
      return std::make_unique<GreedySentence>(model, options, limits);
    case SearchKind::Beam:
      if (options.beam_groups > 1) return make_group_beam_sentence(model, options, limits);
      return make_beam_sentence(model, options, limits);
    case SearchKind::Sampling:
      return std::make_unique<SamplingSentence>(model, options, limits, sentence_id);
  }
  throw Error("unknown search kind");
}

}  // namespace seqtrans
