#include "search/greedy.h"

#include <cmath>

#include "core/error.h"
#include "search/search_common.h"

namespace seqtrans {

OnePathSentence::OnePathSentence(const StepModel& model, const SearchOptions& /*options*/,
                                 const SentenceLimits& limits)
    : eos_id_(model.eos_id()),
      start_id_(model.decoder_start_id()),
      vocab_(model.target_vocab_size()),
      min_length_(limits.min_length),
      prefix_(limits.prefix),
      position_{0, limits.max_generated},
      inputs_{model.decoder_start_id()} {}

void OnePathSentence::add_histories(std::vector<std::vector<int32_t>>& histories) const {
  histories.push_back(decoder_history(start_id_, path_.tokens));
}

void OnePathSentence::advance(const SlotOutputs& outputs, std::vector<int32_t>& continuing) {
  continuing.clear();
  SEQTRANS_CHECK(!done_, "one-path search: the sentence is already done");
  const bool forced = static_cast<size_t>(position_.generated) < prefix_.size();
  const PathChoice choice = forced ? PathChoice{prefix_[static_cast<size_t>(position_.generated)], 0.0f}
                                   : choose(outputs, position_);
  SEQTRANS_CHECK(choice.token >= 0 && choice.token < vocab_ && std::isfinite(choice.log_prob),
                 "no token has a finite score at step {}", position_.generated);
  path_.score += choice.log_prob;
  position_.generated += 1;
  if (choice.token == eos_id_) {
    path_.finished = true;
    done_ = true;
    return;
  }
  path_.tokens.push_back(choice.token);
  path_.finished = false;  // unless it goes on: cut by the maximum length
  done_ = static_cast<int>(path_.tokens.size()) >= position_.max_generated;
  if (done_) return;
  inputs_[0] = choice.token;
  continuing.push_back(0);
}

SearchResult OnePathSentence::take_result() {
  SEQTRANS_CHECK(done_, "one-path search: result taken before the sentence is done");
  SearchResult result;
  result.hypotheses.push_back(std::move(path_));
  return result;
}

GreedySentence::GreedySentence(const StepModel& model, const SearchOptions& options, const SentenceLimits& limits)
    : OnePathSentence(model, options, limits), force_eos_at_max_length_(options.force_eos_at_max_length) {}

PathChoice GreedySentence::choose(const SlotOutputs& outputs, const RowPosition& position) {
  if (force_eos_at_max_length_ && position.generated == position.max_generated - 1) return {eos_id(), 0.0f};
  const StepCandidates& candidates = *outputs.candidates;
  const size_t row = static_cast<size_t>(outputs.first_slot) * static_cast<size_t>(candidates.k);
  // Candidates are best first; a sentence that bans EOS takes the best other one.
  for (int i = 0; i < candidates.k; ++i) {
    const int32_t token = candidates.ids[row + i];
    if (token == eos_id() && eos_banned(0)) continue;
    return {token, candidates.log_probs[row + i]};
  }
  return {};
}

}  // namespace seqtrans
