#include "scheduler/decoding_scheduler.h"

#include <algorithm>

#include "core/error.h"
#include "search/search.h"

namespace seqtrans {

DecodingScheduler::DecodingScheduler(StepModel& model, const SearchOptions& search, const SchedulerOptions& options)
    : options_(options), model_(model), slots_per_sentence_(slots_per_sentence(search)), session_(model, search) {
  SEQTRANS_CHECK(options.max_sentences >= 1 && options.max_tokens >= 1 && options.min_join >= 1,
                 "scheduler: the sentence and token budgets and min_join must be at least 1");
  // Naive batching keeps done sentences' rows until the whole batch is done: only a batch has an end.
  SEQTRANS_CHECK(search.shrink_batch || options.batching == Batching::Shrinking,
                 "naive batching (done sentences keep their rows) needs batch-level batching");
}

void DecodingScheduler::submit(SessionSentence sentence) { waiting_.push_back(std::move(sentence)); }

size_t DecodingScheduler::tokens_in_flight() const {
  size_t tokens = 0;
  for (const auto& entry : in_flight_tokens_) tokens += entry.second;
  return tokens;
}

std::vector<SessionSentence> DecodingScheduler::next_wave() {
  std::vector<SessionSentence> wave;
  const size_t in_flight = session_.active_sentences();
  if (options_.batching == Batching::Shrinking) {
    // A new batch only once the last one is done: sentences x longest within the token budget.
    if (in_flight > 0 || session_.active_slots() > 0) return wave;
    size_t longest = 0;
    while (!waiting_.empty() && wave.size() < options_.max_sentences) {
      const size_t length = std::max(longest, waiting_.front().source.size());
      if (!wave.empty() && (wave.size() + 1) * length > options_.max_tokens) break;
      longest = length;
      wave.push_back(std::move(waiting_.front()));
      waiting_.pop_front();
    }
    return wave;
  }
  // Iteration: take what fits, first come first served (a long sentence is never passed over, so none
  // starves); a sentence longer than the whole budget goes alone when nothing else is in flight.
  size_t tokens = tokens_in_flight();
  size_t fitting = 0, joining_tokens = 0;
  const int64_t room = session_.state().room_left();
  for (const SessionSentence& sentence : waiting_) {
    const bool alone = in_flight + fitting == 0;
    if (in_flight + fitting >= options_.max_sentences) break;
    if (!alone && tokens + sentence.source.size() > options_.max_tokens) break;
    // The model's pools: the slots in flight hold their outputs' positions, which the token budget alone
    // does not bound.
    const int64_t slots = static_cast<int64_t>(fitting + 1) * slots_per_sentence_;
    const int64_t positions = static_cast<int64_t>(joining_tokens + sentence.source.size()) * slots_per_sentence_;
    if (!alone && session_.state().room_needed(slots, positions) > room) break;
    tokens += sentence.source.size();
    joining_tokens += sentence.source.size();
    ++fitting;
  }
  const bool worth_a_wave = in_flight == 0 || fitting >= std::min(options_.min_join, waiting_.size());
  if (fitting == 0 || !worth_a_wave) return wave;
  for (size_t i = 0; i < fitting; ++i) {
    wave.push_back(std::move(waiting_.front()));
    waiting_.pop_front();
  }
  return wave;
}

void DecodingScheduler::lower_budget(size_t load, const OutOfMemoryError& error) {
  if (load <= 1) throw error;
  const size_t before = options_.max_sentences;
  options_.max_sentences = std::max<size_t>(1, std::min(options_.max_sentences, load) / 2);
  // The joining threshold shrinks with the budget, or a wave could wait for more rows than there are.
  options_.min_join = std::max<size_t>(1, options_.min_join * options_.max_sentences / before);
  ++stats_.memory_retries;
  model_.release_cached(session_.state());  // graphs of the larger row counts hold memory the retry needs
}

void DecodingScheduler::reserve_pools() {
  for (;;) {
    DecoderReservation reservation;
    reservation.sentences = static_cast<int64_t>(options_.max_sentences);
    reservation.slots = reservation.sentences * slots_per_sentence_;
    // The token budget bounds the memory in flight in both modes; a budget lowered for memory lowers it
    // too, at a generous 64 tokens a sentence (newstest2014 averages under 40 with EOS).
    reservation.source_tokens = static_cast<int64_t>(std::min(options_.max_tokens, options_.max_sentences * 64));
    try {
      session_.reserve(reservation);
      reserved_sentences_ = options_.max_sentences;
      return;
    } catch (const OutOfMemoryError& error) {
      lower_budget(options_.max_sentences, error);
      session_.reset_state();  // what the failed reservation took goes back
    }
  }
}

bool DecodingScheduler::restart_over_smaller_pools() {
  if (reserved_sentences_ < 2 * options_.max_sentences) return false;
  requeue(session_.evict_newest(session_.active_sentences()));
  if (session_.active_slots() != 0) return false;  // parked sentences (naive batching) keep the state
  session_.reset_state();
  reserve_pools();
  return true;
}

void DecodingScheduler::requeue(std::vector<SessionSentence> sentences) {
  for (auto it = sentences.rbegin(); it != sentences.rend(); ++it) {
    forget_in_flight(it->id);
    waiting_.push_front(std::move(*it));
  }
}

void DecodingScheduler::shed_load(const OutOfMemoryError& error) {
  const size_t in_flight = session_.active_sentences();
  lower_budget(in_flight, error);
  if (restart_over_smaller_pools()) return;
  std::vector<SessionSentence> evicted = session_.evict_newest(in_flight - options_.max_sentences);
  if (evicted.empty() && session_.active_sentences() == in_flight) throw error;
  requeue(std::move(evicted));
}

void DecodingScheduler::forget_in_flight(uint64_t id) {
  const auto entry = std::find_if(in_flight_tokens_.begin(), in_flight_tokens_.end(),
                                  [id](const auto& candidate) { return candidate.first == id; });
  if (entry != in_flight_tokens_.end()) in_flight_tokens_.erase(entry);
}

void DecodingScheduler::iterate(std::vector<FinishedSentence>& finished) {
  std::vector<SessionSentence> wave = next_wave();
  if (!wave.empty()) {
    const size_t in_flight = session_.active_sentences();
    try {
      session_.add(wave);
    } catch (const OutOfMemoryError& error) {
      lower_budget(in_flight + wave.size(), error);
      for (auto it = wave.rbegin(); it != wave.rend(); ++it) waiting_.push_front(std::move(*it));
      restart_over_smaller_pools();
      return;
    }
    for (const SessionSentence& sentence : wave) in_flight_tokens_.emplace_back(sentence.id, sentence.source.size());
    ++stats_.waves;
    stats_.max_in_flight = std::max(stats_.max_in_flight, session_.active_sentences());
  }
  // A joining prompt's prefill goes one chunk per iteration, each followed by a step of the rows decoding.
  if (session_.admitting_sentences() > 0) {
    try {
      session_.continue_admission();
      ++stats_.admission_shares;
    } catch (const OutOfMemoryError& error) {
      shed_load(error);
      return;
    }
  }
  if (session_.decoding_sentences() == 0) return;
  const int64_t slots = session_.active_slots();
  const size_t before = finished.size();
  size_t steps = 0;
  try {
    // Several steps at once only while no sentence can join before the next read: none waits, or batches
    // join only once the running one is done (shrinking batches).
    const bool run_ahead = waiting_.empty() || options_.batching == Batching::Shrinking;
    steps = session_.step(finished, run_ahead);
  } catch (const OutOfMemoryError& error) {
    shed_load(error);
    return;
  }
  stats_.slot_steps += static_cast<size_t>(slots) * steps;
  stats_.steps += steps;
  for (size_t i = before; i < finished.size(); ++i) forget_in_flight(finished[i].id);
}

}  // namespace seqtrans
