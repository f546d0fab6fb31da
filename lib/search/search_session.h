// A running decode over one decoder state: sentences join between steps, each step advances every active
// sentence's search by one token, and finished sentences leave at once (their rows are freed). A sentence
// the model admits over several calls (chunked prefill) waits, admitting, until its slot joins. The
// decoding scheduler decides who joins and when; search() runs one batch through it.
#pragma once

#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "search/options.h"
#include "search/result.h"
#include "search/sentence_search.h"
#include "search/step_model.h"

namespace seqtrans {

// A sentence handed to a session: the caller's handle for it, its source ids (EOS included), and the key
// of its random stream (sampling): the input line number, so that a line samples the same tokens whatever
// its batch.
struct SessionSentence {
  uint64_t id = 0;
  std::vector<int32_t> source;
  uint64_t stream = 0;
  // Target ids the translation must start with (without EOS), and how many of them are generated tokens;
  // empty: none (see sentence_search.h).
  ForcedStart start;
};

// Where a session's time goes, in seconds of wall time (accumulated over its life).
struct SessionTimes {
  double encode = 0;       // admitting sentences: the encoder and the pools' bookkeeping
  double model_step = 0;   // decoder steps: inputs uploaded, the step run (or replayed), candidates copied back
  double search = 0;       // the searches reading the candidates, and the state's reorder (host bookkeeping)

  SessionTimes& operator+=(const SessionTimes& other) {
    encode += other.encode;
    model_step += other.model_step;
    search += other.search;
    return *this;
  }
  SessionTimes operator-(const SessionTimes& earlier) const {
    return SessionTimes{encode - earlier.encode, model_step - earlier.model_step, search - earlier.search};
  }
};

struct FinishedSentence {
  uint64_t id = 0;
  SearchResult result;
};

class SearchSession {
 public:
  // `options` must be valid (validate_options). The session owns a fresh decoder state of `model`.
  SearchSession(StepModel& model, const SearchOptions& options);
  ~SearchSession();

  // Sizes the model's pools for a run within these bounds (StepModel::reserve).
  void reserve(const DecoderReservation& reservation) { model_.reserve(*state_, reservation); }
  // Encodes `sentences` and adds them to the running decode; they take part from the next step on, or,
  // those the model leaves admitting (StepModel::admit), from the step after the continue_admission call
  // that joins them. If the model throws, none of them was added.
  void add(const std::vector<SessionSentence>& sentences);
  // One share of the admitting sentences' work (StepModel::continue_admission); those it completes join the
  // decode. Nothing to do when none is admitting. If the model throws (out of memory), none joined and the
  // call can be retried.
  void continue_admission();
  // One decoder step over every active sentence; sentences that finish are appended to `finished`. If the
  // model throws (out of memory), no sentence has advanced and the step can be retried. Returns the steps
  // run: with `run_ahead`, greedy sentences take several at once where the model offers it
  // (StepModel::steps_per_read), each fed the last one's choice on the device, read back together; a
  // sentence that ends inside them leaves after the last (its rows after its end are wasted).
  size_t step(std::vector<FinishedSentence>& finished, bool run_ahead = true);
  // Takes up to `count` of the most recently added sentences still searching or admitting out of the
  // decode, freeing their rows, and returns them as they were handed in, oldest first: added again, they
  // search from the start and get the same result (sampling streams are keyed by sentence). Recovery from
  // running out of memory.
  std::vector<SessionSentence> evict_newest(size_t count);
  // Replaces the decoder state with a fresh one, giving its pools back: only with no sentence in it.
  void reset_state();

  // Sentences in flight: searching, or admitting (their rows and blocks are taken too).
  size_t active_sentences() const { return running_ + admitting_.size(); }
  // Sentences whose search runs: step() needs at least one.
  size_t decoding_sentences() const { return running_; }
  size_t admitting_sentences() const { return admitting_.size(); }
  // Decoder rows the next step computes.
  int64_t active_slots() const;
  DecoderState& state() { return *state_; }
  const SessionTimes& times() const { return times_; }

 private:
  struct Active {
    uint64_t id = 0;
    std::vector<int32_t> source;  // kept for a restart after an eviction
    uint64_t stream = 0;
    ForcedStart start;
    std::unique_ptr<SentenceSearch> search;  // null once done and parked (naive batching)
    int32_t first_slot = 0;                  // its first slot in the current step
    // Naive batching (SearchOptions::shrink_batch off): slots kept after it is done, fed EOS. It stays for
    // `bench --ablations`, which measures what letting done sentences leave gains against exactly this.
    std::vector<int32_t> parked_inputs;
  };
  // Runs the model over the current slots and returns what each sentence reads.
  SlotOutputs run_step(StepCandidates& candidates, StepSamples& samples);
  // How many greedy steps to run at once now: 1 unless every sentence takes the device's choice.
  int steps_at_once(bool run_ahead) const;
  // Runs `steps` greedy steps at once and reads them; returns false (nothing run) where a step's request would
  // need more than the best candidate (EOS banned for only some sentences).
  bool step_at_once(int steps, std::vector<FinishedSentence>& finished);
  // The first (slots() - first_new_slot) admitting sentences, whose slots the model appended from
  // first_new_slot on, start their searches.
  void join_admitted(int32_t first_new_slot);
  // Moves `active` (an entry of active_ at or after index `kept`) to index `kept`, and counts it.
  void keep(Active& active, size_t& kept);

  StepModel& model_;
  SearchOptions options_;
  StepPlan plan_;
  ops::SamplingRow sampling_base_;  // what every draw shares (sampling)
  RepetitionRequest repetitions_;   // the repetition settings, without histories
  std::unique_ptr<DecoderState> state_;
  std::vector<Active> active_;  // in slot order
  std::deque<SessionSentence> admitting_;  // admitted, not joined yet: oldest first, as they will join
  std::vector<int32_t> sources_, continuing_;  // a step's scratch, kept for its capacity
  size_t running_ = 0;          // active sentences whose search is not done
  SessionTimes times_;
};

}  // namespace seqtrans
