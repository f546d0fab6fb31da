// The decoding scheduler (docs/ARCHITECTURE.md §5): owns the running decode (a SearchSession over the model's pool
// of decoder rows) and a queue of waiting sentences, and decides at every iteration who joins. Then it
// runs one decoder step over all occupied rows and hands back the sentences that finished.
#pragma once

#include <cstddef>
#include <cstdint>
#include <deque>
#include <memory>
#include <vector>

#include "core/error.h"
#include "search/options.h"
#include "search/search_session.h"
#include "search/step_model.h"

namespace seqtrans {

enum class Batching {
  // Iteration-level batching: waiting sentences join the running decode between any two steps, as soon
  // as the budget has room for them (Orca's iteration-level scheduling).
  Iteration,
  // Batch-level: a batch joins only when the previous one has finished; it shrinks as sentences finish
  // (the engine before iteration-level batching, kept for comparison).
  Shrinking,
};

// The budget of sentences in flight, and the joining policy.
struct SchedulerOptions {
  Batching batching = Batching::Iteration;
  size_t max_sentences = 64;  // sentences in flight (each takes beam_size decoder rows)
  // Source tokens in flight, EOS included. Iteration: the sum over the sentences in flight (the encoder
  // packs them without padding). Shrinking: sentences x the longest, as the batch is padded.
  size_t max_tokens = 4096;
  // Iteration: a wave of joining sentences waits until at least this many fit (or all that wait do), so
  // that encoder passes are not spent on one sentence at a time; with no sentence in flight, any wave goes.
  // Measured on newstest2014 (H100, beam 4, 64 sentences): 1 -> 64.6k target tokens/s (1,415 encoder
  // waves), 8 -> 86-95k (327 waves), 32 -> 109k (91 waves): the translator's default is half the budget.
  size_t min_join = 8;
};

// Counters for the benchmark and the summary.
struct SchedulerStats {
  size_t waves = 0;         // encoder passes (admit calls)
  size_t admission_shares = 0;  // continue_admission calls (chunked prefill: a chunk each)
  size_t steps = 0;         // decoder steps
  size_t slot_steps = 0;    // decoder rows computed, summed over steps
  size_t max_in_flight = 0; // most sentences in flight at once
  size_t memory_retries = 0; // times the device ran out of memory and the budget was halved
};

class DecodingScheduler {
 public:
  DecodingScheduler(StepModel& model, const SearchOptions& search, const SchedulerOptions& options);

  // Queues a sentence (FIFO): the caller's id and its source ids, EOS included.
  void submit(SessionSentence sentence);
  // One iteration: admits the waiting sentences the budget and the policy allow, continues the admission of
  // those still admitting (a prefill chunk), runs one decoder step over the rows decoding, and appends the
  // sentences that finished to `finished`. Does nothing when idle().
  // Out of device memory (OutOfMemoryError from the model), the sentence budget is halved: a wave that
  // failed to join waits again, a step or prefill chunk that failed sends its newest half of the sentences
  // back to the front of the queue to restart; only one sentence alone running out of memory is an error.
  void iterate(std::vector<FinishedSentence>& finished);
  // The sentence budget in effect: the options', or less after running out of memory.
  size_t max_sentences() const { return options_.max_sentences; }
  // Sizes the model's pools for the sentence budget (StepModel::reserve), halving the budget until they fit
  // in the device's memory; only one sentence's pools not fitting is an error. Steps then never move them.
  void reserve_pools();

  bool idle() const { return waiting_.empty() && session_.active_sentences() == 0; }
  size_t waiting() const { return waiting_.size(); }
  size_t in_flight() const { return session_.active_sentences(); }
  const SchedulerStats& stats() const { return stats_; }
  const SessionTimes& times() const { return session_.times(); }
  DecoderState& state() { return session_.state(); }

 private:
  // The waiting sentences (from the front) that join now; empty when the policy says wait.
  std::vector<SessionSentence> next_wave();
  size_t tokens_in_flight() const;
  // Halves the sentence budget from `load` sentences (at least 1); rethrows when `load` was one.
  void lower_budget(size_t load, const OutOfMemoryError& error);
  // Out of memory in a step or an admission share: halves the budget and sends the newest sentences in
  // flight (admitting ones first) back to the queue; rethrows when there is nothing left to shed.
  void shed_load(const OutOfMemoryError& error);
  void forget_in_flight(uint64_t id);
  // After the budget was lowered: pools reserved for twice the budget or more hold memory the retry needs,
  // and grow by their reserved rows (a longer source regrows every reserved row), so fewer sentences alone
  // would free nothing. Every sentence in flight then restarts over pools reserved for the lowered budget.
  // Returns whether it did.
  bool restart_over_smaller_pools();
  // Sends sentences back to the front of the queue, in their order.
  void requeue(std::vector<SessionSentence> sentences);

  SchedulerOptions options_;
  StepModel& model_;
  int64_t slots_per_sentence_;
  size_t reserved_sentences_ = 0;  // the budget the pools were reserved for (0: not reserved, they grow)
  SearchSession session_;
  std::deque<SessionSentence> waiting_;
  std::vector<std::pair<uint64_t, size_t>> in_flight_tokens_;  // (id, source length) of sentences in flight
  SchedulerStats stats_;
};

}  // namespace seqtrans
