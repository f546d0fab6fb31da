// One hypothesis per sentence: greedy search.
#pragma once

#include <cstdint>
#include <vector>

#include "search/options.h"
#include "search/sentence_search.h"

namespace seqtrans {

// Where a one-path sentence stands.
struct RowPosition {
  int generated = 0;      // tokens generated before this step
  int max_generated = 1;  // the sentence's maximum generated length, EOS included
};

// The token a path takes at one step and its processed log-prob (log_softmax of the raw logits, then the
// masks; a forced EOS contributes 0 as in HF beam search).
struct PathChoice {
  int32_t token = -1;
  float log_prob = 0.0f;
};

// A sentence decoded along one path: each step feeds its last token, takes the token `choose` gives (the
// prefix's while it lasts, adding 0) and stops at EOS or at its maximum length. Score = sum of the chosen
// log-probs.
class OnePathSentence : public SentenceSearch {
 public:
  OnePathSentence(const StepModel& model, const SearchOptions& options, const SentenceLimits& limits);

  const std::vector<int32_t>& inputs() const override { return inputs_; }
  bool eos_banned(int steps_ahead) const override { return position_.generated + steps_ahead < min_length_; }
  void add_histories(std::vector<std::vector<int32_t>>& histories) const override;
  void advance(const SlotOutputs& outputs, std::vector<int32_t>& continuing) override;
  bool done() const override { return done_; }
  SearchResult take_result() override;

 protected:
  // The next token of the path, whose slot's row is outputs.first_slot.
  virtual PathChoice choose(const SlotOutputs& outputs, const RowPosition& position) = 0;
  int32_t eos_id() const { return eos_id_; }
  // Whether the prefix still forces tokens (it forces the next ones while any remain).
  bool prefix_left() const { return static_cast<size_t>(position_.generated) < prefix_.size(); }
  int steps_to_limit() const { return position_.max_generated - position_.generated; }

 private:
  int32_t eos_id_;
  int32_t start_id_;
  int64_t vocab_;
  int min_length_;
  std::vector<int32_t> prefix_;
  RowPosition position_;
  std::vector<int32_t> inputs_;  // [1]
  Hypothesis path_;
  bool done_ = false;
};

// HF `_sample` with do_sample=False: the arg-max at every step, read from the model's fused top-k
// (StepModel::step_candidates), so that only k values per slot leave the device.
class GreedySentence : public OnePathSentence {
 public:
  GreedySentence(const StepModel& model, const SearchOptions& options, const SentenceLimits& limits);
  // The arg-max is the device's best candidate when the request has k = 1 (EOS, while banned, is suppressed
  // there); a forced EOS at the maximum length ends the sentence, so nothing is fed after it.
  bool takes_device_choice() const override { return !done() && !prefix_left(); }
  int steps_left() const override { return steps_to_limit(); }

 protected:
  PathChoice choose(const SlotOutputs& outputs, const RowPosition& position) override;

 private:
  bool force_eos_at_max_length_;
};

}  // namespace seqtrans
