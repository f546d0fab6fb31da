// One sentence's search as a small state machine (docs/ARCHITECTURE.md §5): it says what its slots feed to the next
// decoder step, reads what that step gave them, and says which slots continue, fork or finish. The
// rules are those of greedy search, beam search and sampling; who loops over steps and sentences is the
// decoding scheduler's business (lib/scheduler), so sentences can join and leave between any two steps.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "search/options.h"
#include "search/result.h"
#include "search/step_model.h"

namespace seqtrans {

// What one decoder step gave a sentence: the rows of its slots, which are contiguous in the step.
struct SlotOutputs {
  const StepCandidates* candidates = nullptr;  // [step slots, k]: greedy and beam search
  const StepSamples* samples = nullptr;        // [step slots]: sampling
  int64_t first_slot = 0;                      // the sentence's first slot in the step
};

class SentenceSearch {
 public:
  virtual ~SentenceSearch() = default;

  // What the next step feeds each of the sentence's slots, in slot order (one slot to start with).
  virtual const std::vector<int32_t>& inputs() const = 0;
  // True while the step `steps_ahead` after the next one must not choose EOS for this sentence (min_length
  // not reached by then).
  virtual bool eos_banned(int steps_ahead) const = 0;
  // Appends each slot's decoder inputs so far (the start id, the generated ids, the id the next step feeds),
  // in slot order: the history the repetition controls read.
  virtual void add_histories(std::vector<std::vector<int32_t>>& histories) const = 0;
  // Sampling: appends the settings of each slot's next draw (`base` with the slot's stream, step, sample
  // index and banned EOS), in slot order. Other searches draw nothing.
  virtual void add_draws(const ops::SamplingRow& base, std::vector<ops::SamplingRow>& rows) const;
  // Steps run on the device (SearchSession): true when, at every coming step until it ends, the sentence
  // takes for its slot the token the device chooses there (the best candidate of a k = 1 request), so that
  // several steps can run before the host reads them, each fed the last one's choice on the device. False
  // where the host decides otherwise (a target prefix's forced tokens, beam search, sampling).
  virtual bool takes_device_choice() const { return false; }
  // The most steps the sentence may still take (its length limit), where takes_device_choice().
  virtual int steps_left() const { return 1; }
  // Reads this step's rows of the sentence's slots and moves on. `continuing` gets, for each slot of the
  // next step, the index (among the sentence's current slots) of the slot whose state it continues; it is
  // left empty once the sentence is done.
  virtual void advance(const SlotOutputs& outputs, std::vector<int32_t>& continuing) = 0;
  virtual bool done() const = 0;
  // The hypotheses, best first; once, after done().
  virtual SearchResult take_result() = 0;
};

// What bounds one sentence's output. Lengths count the prefix: a sentence with a prefix of P ids may take
// max_generated - P more, EOS included, and none of them EOS before min_length - P.
struct SentenceLimits {
  int max_generated = 1;
  int min_length = 0;
  std::vector<int32_t> prefix;  // forced target ids, no EOS
  int prompt_length = 0;        // of which a prompt (the rest, first, are generated: a forced language token)

  int prompt() const { return prompt_length; }
};

// The target ids a sentence's output is forced to start with (no EOS): its first `generated` ids are
// generated tokens (a multilingual model's language token, HF's forced_bos_token_id), counted in the
// lengths; the rest are a prompt (a target prefix, HF's decoder_input_ids), which is not.
struct ForcedStart {
  std::vector<int32_t> ids;
  size_t generated = 0;
};

// How every sentence of one search is stepped: the candidates each row needs (greedy and beam), or one
// draw per row (sampling).
struct StepPlan {
  bool samples = false;
  int k = 1;  // candidates per row, EOS counted, when no row bans EOS
};

// The settings every draw of a search shares (temperature and filters, seed); add_draws fills the rest.
ops::SamplingRow sampling_base(const SearchOptions& options);

StepPlan step_plan(const StepModel& model, const SearchOptions& options);

// The request of one step whose rows `banned` ([slots]) say which must not choose EOS. When every row or
// none bans it, EOS goes into the suppressed list (one list for all rows: the fast path); when only some
// do, each row gets one candidate more and the sentences that ban EOS skip it. Suppression comes after
// normalization, so the other candidates' log-probs are the same either way.
CandidateRequest candidate_request(const StepModel& model, const StepPlan& plan, const std::vector<char>& banned);

// A sentence's search under `options` (validated), for a source of `source_length` ids. `sentence_id`
// (the input line) keys its random stream (sampling), so a line samples the same tokens whatever its batch.
// Non-empty `start.ids` start every hypothesis, CTranslate2's hard target_prefix: its tokens are forced one
// step each, add log-prob 0 to the score (CTranslate2 sets a forced token's score to 0, as HF's forced BOS
// does), and are part of the output. Lengths count the tokens after its prompt part, EOS included, as HF
// generate() does with a prefix in decoder_input_ids: the length limit and minimum, and beam search's
// length normalization (where CTranslate2 divides by the whole hypothesis instead).
std::unique_ptr<SentenceSearch> make_sentence_search(const StepModel& model, const SearchOptions& options,
                                                     size_t source_length, uint64_t sentence_id,
                                                     const ForcedStart& start = {});

}  // namespace seqtrans
