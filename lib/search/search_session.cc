#include "search/search_session.h"

#include <algorithm>
#include <chrono>
#include <iterator>
#include <numeric>

#include "core/error.h"
#include "search/search.h"
#include "search/search_common.h"

namespace seqtrans {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_between(Clock::time_point start, Clock::time_point end) {
  return std::chrono::duration<double>(end - start).count();
}

}  // namespace

SearchSession::SearchSession(StepModel& model, const SearchOptions& options)
    : model_(model),
      options_(options),
      plan_(step_plan(model, options)),
      sampling_base_(sampling_base(options)),
      repetitions_{options.repetition_penalty, options.no_repeat_ngram_size,
                   /*on_log_probs=*/search_kind(options) == SearchKind::Beam, {}},
      state_(model.start()) {
  check_step_model(model);
}

SearchSession::~SearchSession() = default;

int64_t SearchSession::active_slots() const { return state_->slots(); }

void SearchSession::add(const std::vector<SessionSentence>& sentences) {
  if (sentences.empty()) return;
  const Clock::time_point start = Clock::now();
  std::vector<std::vector<int32_t>> sources;
  sources.reserve(sentences.size());
  for (const SessionSentence& sentence : sentences) sources.push_back(sentence.source);
  const int32_t first_new = static_cast<int32_t>(state_->slots());
  model_.admit(*state_, sources);
  admitting_.insert(admitting_.end(), sentences.begin(), sentences.end());
  join_admitted(first_new);
  times_.encode += seconds_between(start, Clock::now());
}

void SearchSession::continue_admission() {
  if (admitting_.empty()) return;
  const Clock::time_point start = Clock::now();
  const int32_t first_new = static_cast<int32_t>(state_->slots());
  model_.continue_admission(*state_);
  join_admitted(first_new);
  times_.encode += seconds_between(start, Clock::now());
}

void SearchSession::join_admitted(int32_t first_new) {
  const size_t joined = static_cast<size_t>(state_->slots() - first_new);
  SEQTRANS_CHECK(joined <= admitting_.size() && state_->admitting() == admitting_.size() - joined,
                 "search session: {} slots joined and {} sources still admitting, of {} admitted", joined,
                 state_->admitting(), admitting_.size());
  if (joined == 0) return;
  // A search may start on several slots (samples): its admitted slot is repeated, all at position 0.
  std::vector<int32_t> expanded(static_cast<size_t>(first_new));
  std::iota(expanded.begin(), expanded.end(), 0);
  for (size_t i = 0; i < joined; ++i) {
    SessionSentence& sentence = admitting_.front();
    Active active;
    active.id = sentence.id;
    active.source = std::move(sentence.source);
    active.stream = sentence.stream;
    active.start = std::move(sentence.start);
    active.search = make_sentence_search(model_, options_, active.source.size(), active.stream, active.start);
    active.first_slot = static_cast<int32_t>(expanded.size());
    expanded.insert(expanded.end(), active.search->inputs().size(), first_new + static_cast<int32_t>(i));
    active_.push_back(std::move(active));
    admitting_.pop_front();
    ++running_;
  }
  if (!is_identity_selection(expanded, state_->slots())) model_.select(*state_, expanded);
}

SlotOutputs SearchSession::run_step(StepCandidates& candidates, StepSamples& samples) {
  std::vector<int32_t> input_ids;
  std::vector<char> banned;
  SampleRequest draws;
  RepetitionRequest repetitions = repetitions_;
  for (const Active& active : active_) {
    const std::vector<int32_t>& inputs = active.search ? active.search->inputs() : active.parked_inputs;
    input_ids.insert(input_ids.end(), inputs.begin(), inputs.end());
    banned.insert(banned.end(), inputs.size(), active.search && active.search->eos_banned(0));
    if (repetitions.on()) {
      if (active.search) {
        const size_t first = repetitions.histories.size();
        active.search->add_histories(repetitions.histories);
        if (model_.prompt_in_history())
          for (size_t h = first; h < repetitions.histories.size(); ++h) {
            std::vector<int32_t>& history = repetitions.histories[h];  // the start id, then the generated ids
            history.erase(history.begin());
            history.insert(history.begin(), active.source.begin(), active.source.end());
          }
      } else
        repetitions.histories.insert(repetitions.histories.end(), inputs.size(), {model_.decoder_start_id()});
    }
    if (!plan_.samples) continue;
    if (active.search)
      active.search->add_draws(sampling_base_, draws.rows);
    else
      draws.rows.insert(draws.rows.end(), inputs.size(), sampling_base_);  // parked: drawn and ignored
  }
  SlotOutputs outputs;
  if (plan_.samples) {
    draws.suppressed_ids = suppressed_without_eos(model_);
    draws.repetitions = std::move(repetitions);
    model_.step_samples(*state_, input_ids, draws, samples);
    outputs.samples = &samples;
  } else {
    CandidateRequest request = candidate_request(model_, plan_, banned);
    request.repetitions = std::move(repetitions);
    model_.step_candidates(*state_, input_ids, request, candidates);
    outputs.candidates = &candidates;
  }
  return outputs;
}

int SearchSession::steps_at_once(bool run_ahead) const {
  // Admitting sentences take their next share between two steps (chunked prefill), not after several.
  if (!run_ahead || !admitting_.empty() || plan_.samples || plan_.k != 1 || repetitions_.on() ||
      !options_.shrink_batch)
    return 1;
  int steps = model_.steps_per_read();
  for (const Active& active : active_) {
    if (steps <= 1) break;
    if (!active.search || !active.search->takes_device_choice()) return 1;
    steps = std::min(steps, active.search->steps_left());
  }
  return std::max(steps, 1);
}

bool SearchSession::step_at_once(int steps, std::vector<FinishedSentence>& finished) {
  std::vector<int32_t> input_ids;
  for (const Active& active : active_) input_ids.insert(input_ids.end(), active.search->inputs().begin(),
                                                        active.search->inputs().end());
  std::vector<CandidateRequest> requests;
  for (int j = 0; j < steps; ++j) {
    std::vector<char> banned;
    for (const Active& active : active_) banned.push_back(active.search->eos_banned(j));
    requests.push_back(candidate_request(model_, plan_, banned));
    if (requests.back().k != 1) return false;
  }
  const Clock::time_point start = Clock::now();
  std::vector<StepCandidates> candidates;
  model_.step_candidates_run(*state_, input_ids, requests, candidates);
  const Clock::time_point stepped = Clock::now();
  times_.model_step += seconds_between(start, stepped);

  // Each step is read in turn by the sentences still running; slots do not move until the last.
  std::vector<char> ended(active_.size(), 0);
  for (int j = 0; j < steps; ++j) {
    for (size_t i = 0; i < active_.size(); ++i) {
      if (ended[i]) continue;
      Active& active = active_[i];
      SlotOutputs outputs;
      outputs.candidates = &candidates[static_cast<size_t>(j)];
      outputs.first_slot = active.first_slot;
      active.search->advance(outputs, continuing_);
      if (!active.search->done()) {
        SEQTRANS_CHECK(continuing_.size() == 1 && continuing_[0] == 0, "steps at once: a sentence moved its slot");
        continue;
      }
      finished.push_back(FinishedSentence{active.id, active.search->take_result()});
      --running_;
      ended[i] = 1;
    }
  }
  std::vector<int32_t>& sources = sources_;
  sources.clear();
  size_t kept = 0;
  for (size_t i = 0; i < active_.size(); ++i) {
    if (ended[i]) continue;
    sources.push_back(active_[i].first_slot);
    active_[i].first_slot = static_cast<int32_t>(kept);
    keep(active_[i], kept);
  }
  active_.resize(kept);
  if (!is_identity_selection(sources, state_->slots())) model_.select(*state_, sources);
  times_.search += seconds_between(stepped, Clock::now());
  return true;
}

size_t SearchSession::step(std::vector<FinishedSentence>& finished, bool run_ahead) {
  SEQTRANS_CHECK(running_ > 0, "search session: no sentence to step");
  const int steps = steps_at_once(run_ahead);
  if (steps > 1 && step_at_once(steps, finished)) return static_cast<size_t>(steps);
  StepCandidates candidates;
  StepSamples samples;
  const Clock::time_point start = Clock::now();
  SlotOutputs outputs = run_step(candidates, samples);
  const Clock::time_point stepped = Clock::now();
  times_.model_step += seconds_between(start, stepped);

  // Sentences that stay are compacted in place, in order; `sources` and `continuing` keep their capacity.
  std::vector<int32_t>& sources = sources_;  // [next slots] the slot each continues
  std::vector<int32_t>& continuing = continuing_;
  sources.clear();
  size_t kept = 0;
  for (Active& active : active_) {
    const int32_t first = active.first_slot;
    active.first_slot = static_cast<int32_t>(sources.size());
    if (!active.search) {  // parked (naive batching): its slots stay until the whole batch is done
      for (size_t i = 0; i < active.parked_inputs.size(); ++i) sources.push_back(first + static_cast<int32_t>(i));
      keep(active, kept);
      continue;
    }
    outputs.first_slot = first;
    const size_t slots_before = active.search->inputs().size();
    active.search->advance(outputs, continuing);
    if (active.search->done()) {
      finished.push_back(FinishedSentence{active.id, active.search->take_result()});
      --running_;
      if (options_.shrink_batch) continue;
      // Naive batching keeps a constant batch: beam_size slots (or samples) per sentence after the first step.
      const size_t parked = std::max(slots_before, static_cast<size_t>(slots_per_sentence(options_)));
      active.search.reset();
      active.parked_inputs.assign(parked, model_.eos_id());
      for (size_t i = 0; i < parked; ++i) sources.push_back(first + static_cast<int32_t>(i % slots_before));
      keep(active, kept);
      continue;
    }
    for (int32_t index : continuing) sources.push_back(first + index);
    keep(active, kept);
  }
  active_.resize(kept);
  // Once every sentence is done, the parked ones leave too.
  if (running_ == 0) {
    active_.clear();
    sources.clear();
  }
  if (!is_identity_selection(sources, state_->slots())) model_.select(*state_, sources);
  times_.search += seconds_between(stepped, Clock::now());
  return 1;
}

void SearchSession::keep(Active& active, size_t& kept) {
  if (&active_[kept] != &active) active_[kept] = std::move(active);
  ++kept;
}

void SearchSession::reset_state() {
  SEQTRANS_CHECK(active_.empty() && admitting_.empty(), "search session: the state is reset with {} sentences in it",
                 active_.size() + admitting_.size());
  state_.reset();  // the old pools go back before the new state takes any
  state_ = model_.start();
}

std::vector<SessionSentence> SearchSession::evict_newest(size_t count) {
  // The admitting sentences are the newest (they join after every active one), oldest first.
  const size_t withdrawn = std::min(count, admitting_.size());
  std::vector<SessionSentence> admitting_evicted;
  if (withdrawn > 0) {
    model_.withdraw_admitting(*state_, withdrawn);
    const auto first = admitting_.end() - static_cast<std::ptrdiff_t>(withdrawn);
    admitting_evicted.assign(std::make_move_iterator(first), std::make_move_iterator(admitting_.end()));
    admitting_.erase(first, admitting_.end());
  }
  // Active sentences sit in slot order, newest last; parked ones (naive batching) are done and stay.
  size_t keep = active_.size();
  while (keep > 0 && active_.size() - keep < count - withdrawn && active_[keep - 1].search) --keep;
  std::vector<SessionSentence> evicted;
  if (keep < active_.size()) {
    for (size_t i = keep; i < active_.size(); ++i) {
      Active& active = active_[i];
      evicted.push_back(SessionSentence{active.id, std::move(active.source), active.stream, std::move(active.start)});
      --running_;
    }
    const int32_t kept_slots = active_[keep].first_slot;
    active_.resize(keep);
    std::vector<int32_t> sources(static_cast<size_t>(kept_slots));
    std::iota(sources.begin(), sources.end(), 0);
    model_.select(*state_, sources);
  }
  std::move(admitting_evicted.begin(), admitting_evicted.end(), std::back_inserter(evicted));
  return evicted;
}

}  // namespace seqtrans
