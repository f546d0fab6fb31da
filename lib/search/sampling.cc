#include "search/sampling.h"

#include <cmath>

#include "core/error.h"
#include "search/search_common.h"

namespace seqtrans {

SamplingSentence::SamplingSentence(const StepModel& model, const SearchOptions& options, const SentenceLimits& limits,
                                   uint64_t line)
    : eos_id_(model.eos_id()),
      start_id_(model.decoder_start_id()),
      vocab_(model.target_vocab_size()),
      min_length_(limits.min_length),
      max_generated_(limits.max_generated),
      prefix_(limits.prefix),
      force_eos_at_max_length_(options.force_eos_at_max_length),
      line_(line),
      samples_(static_cast<size_t>(options.num_hypotheses)) {
  for (int32_t s = 0; s < options.num_hypotheses; ++s) {
    running_.push_back(s);
    inputs_.push_back(model.decoder_start_id());
  }
}

void SamplingSentence::add_histories(std::vector<std::vector<int32_t>>& histories) const {
  for (int32_t sample : running_)
    histories.push_back(decoder_history(start_id_, samples_[static_cast<size_t>(sample)].tokens));
}

void SamplingSentence::add_draws(const ops::SamplingRow& base, std::vector<ops::SamplingRow>& rows) const {
  for (int32_t sample : running_) {
    ops::SamplingRow row = base;
    row.line_low = static_cast<uint32_t>(line_);
    row.line_high = static_cast<uint32_t>(line_ >> 32);
    row.step = static_cast<uint32_t>(generated_);
    row.sample = static_cast<uint32_t>(sample);
    row.banned_id = eos_banned(0) ? eos_id_ : -1;
    rows.push_back(row);
  }
}

void SamplingSentence::advance(const SlotOutputs& outputs, std::vector<int32_t>& continuing) {
  continuing.clear();
  SEQTRANS_CHECK(!done(), "sampling: the sentence is already done");
  // A prefix token, then HF's forced EOS (EOS as the only token at the last allowed step), add log-prob 0.
  const bool in_prefix = static_cast<size_t>(generated_) < prefix_.size();
  const bool forced = in_prefix || (force_eos_at_max_length_ && generated_ == max_generated_ - 1);
  const int32_t forced_token = in_prefix ? prefix_[static_cast<size_t>(generated_)] : eos_id_;
  std::vector<int32_t> still_running;
  inputs_.clear();
  for (size_t slot = 0; slot < running_.size(); ++slot) {
    const size_t row = static_cast<size_t>(outputs.first_slot) + slot;
    const int32_t token = forced ? forced_token : outputs.samples->ids[row];
    const float log_prob = forced ? 0.0f : outputs.samples->log_probs[row];
    SEQTRANS_CHECK(token >= 0 && token < vocab_ && std::isfinite(log_prob), "no token has a finite score at step {}",
                   generated_);
    Hypothesis& sample = samples_[static_cast<size_t>(running_[slot])];
    sample.score += log_prob;
    if (token == eos_id_) {
      sample.finished = true;
      continue;
    }
    sample.tokens.push_back(token);
    sample.finished = false;  // unless it goes on: cut by the maximum length
    if (static_cast<int>(sample.tokens.size()) >= max_generated_) continue;
    still_running.push_back(running_[slot]);
    inputs_.push_back(token);
    continuing.push_back(static_cast<int32_t>(slot));
  }
  running_ = std::move(still_running);
  generated_ += 1;
}

SearchResult SamplingSentence::take_result() {
  SEQTRANS_CHECK(done(), "sampling: result taken before the sentence is done");
  SearchResult result;
  result.hypotheses = std::move(samples_);
  return result;
}

}  // namespace seqtrans
