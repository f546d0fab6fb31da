// Random sampling (HF `_sample` with do_sample=True) of one or several independent samples per sentence.
// The draws happen in the model's output layer (ops::sample_tokens, on the device when the model runs
// there); a sentence only says which stream each of its slots draws from and reads the drawn tokens.
#pragma once

#include <cstdint>
#include <vector>

#include "search/options.h"
#include "search/sentence_search.h"

namespace seqtrans {

// num_hypotheses samples of one sentence, sample s in the sentence's slot s while it runs. Every draw is
// keyed by (seed, input line, step, s), so a sample does not depend on the batch, on the other samples or
// on how many there are: sample 0 of --n-best 8 is the sample of --n-best 1. A sample's score is the sum
// of its tokens' log-probs under the model (log_softmax of the logits, masks applied; temperature and
// filters do not enter); a forced EOS adds 0. Results come in sample order, not sorted by score.
class SamplingSentence : public SentenceSearch {
 public:
  SamplingSentence(const StepModel& model, const SearchOptions& options, const SentenceLimits& limits, uint64_t line);

  const std::vector<int32_t>& inputs() const override { return inputs_; }
  bool eos_banned(int steps_ahead) const override { return generated_ + steps_ahead < min_length_; }
  void add_histories(std::vector<std::vector<int32_t>>& histories) const override;
  void add_draws(const ops::SamplingRow& base, std::vector<ops::SamplingRow>& rows) const override;
  void advance(const SlotOutputs& outputs, std::vector<int32_t>& continuing) override;
  bool done() const override { return running_.empty(); }
  SearchResult take_result() override;

 private:
  int32_t eos_id_;
  int32_t start_id_;
  int64_t vocab_;
  int min_length_;
  int max_generated_;
  std::vector<int32_t> prefix_;
  bool force_eos_at_max_length_;
  uint64_t line_;
  int generated_ = 0;                 // tokens every running sample has generated
  std::vector<Hypothesis> samples_;   // [num_hypotheses]
  std::vector<int32_t> running_;      // samples still running, in slot order
  std::vector<int32_t> inputs_;       // [running] the token each feeds next
};

}  // namespace seqtrans
