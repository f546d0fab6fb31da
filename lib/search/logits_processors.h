// Small composable transforms of one row of next-token scores (DESIGN.md §4): search builds short chains
// of them instead of hard-coding masking, normalization and sampling filters into each algorithm.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "search/options.h"
#include "search/step_model.h"

namespace seqtrans {

// One row of next-token scores, owned by the caller and transformed in place.
struct ScoreRow {
  float* values = nullptr;  // [vocab]
  int64_t vocab = 0;
};

// Where the hypothesis owning a row stands; processors that depend on the step read it.
struct RowPosition {
  int generated = 0;      // tokens generated before this step
  int max_generated = 1;  // the sentence's maximum generated length, EOS included
};

// One transform of a score row (Hugging Face's LogitsProcessor, CTranslate2's LogitsProcessor).
class LogitsProcessor {
 public:
  virtual ~LogitsProcessor() = default;
  virtual void apply(ScoreRow row, const RowPosition& position) const = 0;
};

// values -> log_softmax(values) over the full row; fp32 output, the exp-sum accumulated in double.
class LogSoftmax : public LogitsProcessor {
 public:
  void apply(ScoreRow row, const RowPosition& position) const override;
};

// Sets the scores of ids the model must never emit to -inf (HF NoBadWords/SuppressTokens).
class SuppressIds : public LogitsProcessor {
 public:
  explicit SuppressIds(std::vector<int32_t> ids);
  void apply(ScoreRow row, const RowPosition& position) const override;

 private:
  std::vector<int32_t> ids_;
};

// At the last allowed step, every score becomes -inf except EOS, which becomes 0
// (HF ForcedEOSTokenLogitsProcessor: applied where cur_len == max_length - 1).
class ForceEosAtMaxLength : public LogitsProcessor {
 public:
  explicit ForceEosAtMaxLength(int32_t eos_id);
  void apply(ScoreRow row, const RowPosition& position) const override;

 private:
  int32_t eos_id_;
};

// Sets EOS to -inf while fewer than `min_length` tokens were generated (HF MinNewTokensLength).
class SuppressEosBeforeMinLength : public LogitsProcessor {
 public:
  SuppressEosBeforeMinLength(int32_t eos_id, int min_length);
  void apply(ScoreRow row, const RowPosition& position) const override;

 private:
  int32_t eos_id_;
  int min_length_;
};

// values / temperature (HF TemperatureLogitsWarper).
class Temperature : public LogitsProcessor {
 public:
  explicit Temperature(float temperature);
  void apply(ScoreRow row, const RowPosition& position) const override;

 private:
  float temperature_;
};

// Keeps the scores >= the k-th largest (ties with it included, as HF TopKLogitsWarper); the rest -> -inf.
// k = 0 or k >= vocab keeps everything.
class TopKFilter : public LogitsProcessor {
 public:
  explicit TopKFilter(int k);
  void apply(ScoreRow row, const RowPosition& position) const override;

 private:
  int k_;
};

// Nucleus filter with HF TopPLogitsWarper semantics: sort ascending, drop the prefix whose cumulative
// probability is <= 1 - p, always keep the most likely token. Exact ties are ordered so that the kept
// set prefers lower ids.
class TopPFilter : public LogitsProcessor {
 public:
  explicit TopPFilter(float p);
  void apply(ScoreRow row, const RowPosition& position) const override;

 private:
  float p_;
};

// Processors applied in insertion order.
class LogitsProcessorChain {
 public:
  void add(std::unique_ptr<LogitsProcessor> processor);
  void apply(ScoreRow row, const RowPosition& position) const;
  size_t size() const { return processors_.size(); }

 private:
  std::vector<std::unique_ptr<LogitsProcessor>> processors_;
};

// The masks every search applies, in HF's order: suppressed ids (EOS never suppressed, as HF's
// NoBadWordsLogitsProcessor drops EOS from bad_words_ids), EOS before the minimum length, then forced
// EOS when enabled.
LogitsProcessorChain make_mask_chain(const StepModel& model, const SearchOptions& options);
// log_softmax, then the masks: the per-token scores that hypothesis scores accumulate (HF beam search
// normalizes first and masks after).
LogitsProcessorChain make_log_prob_chain(const StepModel& model, const SearchOptions& options);
// HF's sampling warpers in HF's order: temperature, top-k, top-p (each only when it changes anything).
LogitsProcessorChain make_sampling_chain(const SearchOptions& options);

}  // namespace seqtrans
