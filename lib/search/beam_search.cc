// Beam search mirroring transformers 5.23 GenerationMixin._beam_search (generation/utils.py) for one EOS
// id and do_sample=False. Per step of one sentence whose running beams hold t generated tokens:
//  1. Token scores: log_softmax over the full vocabulary first, then suppressed ids -> -inf and, when
//     enabled, forced EOS at t == max - 1 (all -inf, EOS = 0; HF ForcedEOSTokenLogitsProcessor applied
//     to log-probs). Running scores accumulate these in fp32.
//  2. Candidates (_get_top_k_continuations): the best 2 * beam_size (beam, token) pairs by accumulated
//     score over beam x vocab. Exact ties go to the lower flat index beam * vocab + token (our choice:
//     torch.topk leaves tie order unspecified). Running beams are kept in HF's order, so flat indices
//     are HF's.
//  3. A candidate hits a stopping criterion when its token is EOS or t + 1 reaches the maximum length.
//     The next running beams are the first beam_size candidates that do not hit, in rank order
//     (_get_running_beams_for_next_iteration).
//  4. Finishing (_update_finished_beams): only hitting candidates of rank < beam_size finish, so an EOS
//     ranked beam_size or lower is dropped. At the maximum length the top beam_size candidates finish
//     with or without EOS (Hypothesis::finished = false without). Finished score =
//     fp32 sum / (float)((t + 1) ^ length_penalty): the length counts generated tokens, EOS included
//     (HF cur_len + 1 - decoder_prompt_len). New hypotheses merge after the old ones (old first on exact
//     ties) and the best beam_size are kept. HF also blocks additions to a done sentence; done sentences
//     have left the batch here.
//  5. Improvability (_check_early_stop_heuristic), evaluated after the step and sticky once false: true
//     while fewer than beam_size hypotheses have finished; then true while
//     best running score / L ^ length_penalty > worst finished score, where L = t + 1 (Heuristic,
//     FirstComplete, and Never with length_penalty <= 0) or L = the maximum length (Never with
//     length_penalty > 0; HF uses max_length - decoder_prompt_len).
//  6. Done (_beam_search_has_unfinished_sequences): not improvable, or (FirstComplete) beam_size
//     hypotheses finished, or the step reached the maximum length. HF keeps a done sentence in the batch
//     with its finished set frozen; dropping it gives the same result and saves its computation.
//  7. Output: the finished set, best first, cut to num_hypotheses.
// Not mirrored: HF starts beams 1..beam_size-1 as placeholders scored -1e9 and always keeps 2 * beam_size
// candidates, even -inf or placeholder ones. We consider only real, finite candidates. Results agree
// whenever at least 2 * beam_size tokens are not suppressed; with fewer, HF can return junk hypotheses
// scored near -1e9 where we return fewer hypotheses. Scores agree to fp32 rounding of the model's logits.
#include "search/beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "search/logits_processors.h"
#include "search/search.h"
#include "search/search_common.h"

namespace seqtrans {

namespace {

// A running hypothesis of one sentence's beam.
struct RunningBeam {
  std::vector<int32_t> tokens;  // generated ids so far
  float log_prob = 0.0f;        // accumulated processed log-probs (HF running_beam_scores)
  int32_t slot = 0;             // decoder slot that holds its state during the current step
};

// A (beam, token) continuation considered at one step.
struct Candidate {
  float log_prob = 0.0f;   // parent log_prob + token log-prob, fp32 as in HF
  int64_t flat_index = 0;  // beam * vocab + token: the tie order
  int32_t beam = 0;
  int32_t token = 0;
};

bool ranks_before(const Candidate& a, const Candidate& b) {
  return a.log_prob > b.log_prob || (a.log_prob == b.log_prob && a.flat_index < b.flat_index);
}

// Keeps the best `capacity` candidates offered so far, in rank order. Rows must be offered in beam order
// (and each row best first, ties to the lower id), so that an equal score never displaces an earlier,
// lower flat index.
class TopCandidates {
 public:
  explicit TopCandidates(size_t capacity) : capacity_(capacity) { ranked_.reserve(capacity + 1); }

  // Offers a row's best continuations ([count] ids and log-probs, best first, as StepCandidates holds
  // them). The global best 2 * beam_size over beam x vocab are always among the rows' best 2 * beam_size.
  void offer_candidates(int32_t beam, float parent_log_prob, const int32_t* ids, const float* log_probs, int count,
                        int64_t vocab) {
    for (int i = 0; i < count; ++i) {
      const float log_prob = parent_log_prob + log_probs[i];
      // The rest of the row is no better: stop at the first that cannot enter.
      if (!(log_prob > -std::numeric_limits<float>::infinity())) break;
      if (ranked_.size() == capacity_ && !(log_prob > ranked_.back().log_prob)) break;
      const Candidate candidate{log_prob, beam * vocab + ids[i], beam, ids[i]};
      ranked_.insert(std::upper_bound(ranked_.begin(), ranked_.end(), candidate, ranks_before), candidate);
      if (ranked_.size() > capacity_) ranked_.pop_back();
    }
  }

  const std::vector<Candidate>& ranked() const { return ranked_; }

 private:
  size_t capacity_;
  std::vector<Candidate> ranked_;  // best first
};

// A hypothesis that stopped, by EOS or at the maximum length.
struct FinishedHypothesis {
  std::vector<int32_t> tokens;  // without EOS
  float score = 0.0f;           // length-normalized
  bool ended_with_eos = true;
};

// Beam search state of one sentence.
struct SentenceBeam {
  int max_generated = 1;
  int generated = 0;                         // tokens generated by every running beam
  std::vector<RunningBeam> running;          // best first (HF order)
  std::vector<FinishedHypothesis> finished;  // best first, at most beam_size
  bool improvable = true;                    // HF is_early_stop_heuristic_unsatisfied
  bool done = false;
};

// Beam settings that stay fixed for a search.
struct BeamSettings {
  size_t beam_size = 1;
  float length_penalty = 1.0f;
  BeamStopping stopping = BeamStopping::Heuristic;
  int32_t eos_id = 0;
};

// HF divides an fp32 tensor by the Python float length ** length_penalty; on the CPU torch rounds the
// divisor to fp32 first.
float length_normalized(float log_prob, int length, float length_penalty) {
  const double divisor = std::pow(static_cast<double>(length), static_cast<double>(length_penalty));
  return log_prob / static_cast<float>(divisor);
}

void add_finished(SentenceBeam& sentence, const std::vector<Candidate>& ranked, bool reached_max,
                  const BeamSettings& settings) {
  const int length = sentence.generated + 1;
  const size_t finish_ranks = std::min(settings.beam_size, ranked.size());
  bool added = false;
  for (size_t rank = 0; rank < finish_ranks; ++rank) {
    const Candidate& candidate = ranked[rank];
    const bool ended_with_eos = candidate.token == settings.eos_id;
    if (!ended_with_eos && !reached_max) continue;
    FinishedHypothesis hypothesis;
    hypothesis.tokens = sentence.running[candidate.beam].tokens;
    if (!ended_with_eos) hypothesis.tokens.push_back(candidate.token);
    hypothesis.score = length_normalized(candidate.log_prob, length, settings.length_penalty);
    hypothesis.ended_with_eos = ended_with_eos;
    sentence.finished.push_back(std::move(hypothesis));
    added = true;
  }
  if (!added) return;
  // Stable: on equal scores earlier finished hypotheses, then lower ranks, come first (HF's topk over
  // [finished, candidates] with our lower-index tie rule).
  std::stable_sort(sentence.finished.begin(), sentence.finished.end(),
                   [](const FinishedHypothesis& a, const FinishedHypothesis& b) { return a.score > b.score; });
  if (sentence.finished.size() > settings.beam_size) sentence.finished.resize(settings.beam_size);
}

std::vector<RunningBeam> next_running(const SentenceBeam& sentence, const std::vector<Candidate>& ranked,
                                      bool reached_max, const BeamSettings& settings) {
  std::vector<RunningBeam> running;
  if (reached_max) return running;
  for (const Candidate& candidate : ranked) {
    if (candidate.token == settings.eos_id) continue;
    const RunningBeam& parent = sentence.running[candidate.beam];
    RunningBeam beam;
    beam.tokens.reserve(parent.tokens.size() + 1);
    beam.tokens = parent.tokens;
    beam.tokens.push_back(candidate.token);
    beam.log_prob = candidate.log_prob;
    beam.slot = parent.slot;
    running.push_back(std::move(beam));
    if (running.size() == settings.beam_size) break;
  }
  return running;
}

bool still_improvable(const SentenceBeam& sentence, const BeamSettings& settings) {
  if (!sentence.improvable) return false;
  if (sentence.finished.size() < settings.beam_size) return true;
  if (sentence.running.empty()) return false;
  const int best_length = settings.stopping == BeamStopping::Never && settings.length_penalty > 0.0f
                              ? sentence.max_generated
                              : sentence.generated;
  const float best_possible =
      length_normalized(sentence.running.front().log_prob, best_length, settings.length_penalty);
  return best_possible > sentence.finished.back().score;
}

// One beam search step of one sentence, given its ranked candidates.
void advance(SentenceBeam& sentence, const std::vector<Candidate>& ranked, const BeamSettings& settings) {
  const bool reached_max = sentence.generated + 1 >= sentence.max_generated;
  add_finished(sentence, ranked, reached_max, settings);
  sentence.running = next_running(sentence, ranked, reached_max, settings);
  sentence.generated += 1;
  sentence.improvable = still_improvable(sentence, settings);
  const bool complete =
      settings.stopping == BeamStopping::FirstComplete && sentence.finished.size() == settings.beam_size;
  sentence.done = !sentence.improvable || complete || reached_max || sentence.running.empty();
}

SearchResult collect_result(const SentenceBeam& sentence, int num_hypotheses) {
  SearchResult result;
  const size_t count = std::min(static_cast<size_t>(num_hypotheses), sentence.finished.size());
  for (size_t i = 0; i < count; ++i) {
    const FinishedHypothesis& finished = sentence.finished[i];
    result.hypotheses.push_back(Hypothesis{finished.tokens, finished.score, finished.ended_with_eos});
  }
  return result;
}

}  // namespace

std::vector<SearchResult> beam_search(StepModel& model, const std::vector<std::vector<int32_t>>& sources,
                                      const SearchOptions& options) {
  validate_options(options);
  check_step_model(model);
  const int64_t vocab = model.target_vocab_size();
  const BeamSettings settings{static_cast<size_t>(options.beam_size), options.length_penalty, options.beam_stopping,
                              model.eos_id()};
  const std::vector<int> max_lengths = max_generated_lengths(model, sources, options);
  const std::vector<int32_t> suppressed = suppressed_without_eos(model);
  const int32_t eos_id = model.eos_id();

  // Every sentence starts with one running beam in slot i (HF's other beams are -1e9 placeholders).
  std::vector<SentenceBeam> sentences(sources.size());
  std::vector<size_t> active;  // sentences still searching, in slot order
  for (size_t i = 0; i < sources.size(); ++i) {
    sentences[i].max_generated = max_lengths[i];
    sentences[i].running.push_back(RunningBeam{{}, 0.0f, static_cast<int32_t>(i)});
    active.push_back(i);
  }
  std::vector<int32_t> input_ids(sources.size(), model.decoder_start_id());  // [slots]

  std::vector<SearchResult> results(sources.size());
  // Naive batching only (options.shrink_batch false): the slots each done sentence keeps until the whole
  // batch is done (beam_size of them); they are fed EOS and their outputs are ignored.
  std::vector<std::vector<int32_t>> parked_slots(sources.size());
  size_t remaining = sources.size();
  std::unique_ptr<DecoderState> state = model.encode(sources);
  StepCandidates candidates;
  const int k = static_cast<int>(std::min<int64_t>(2 * settings.beam_size, vocab));
  // All running beams of a batch have generated `step` tokens.
  for (int step = 0; remaining > 0; ++step) {
    CandidateRequest request{k, suppressed};
    if (step < options.min_length) request.suppressed_ids.push_back(eos_id);
    model.step_candidates(*state, input_ids, request, candidates);  // [slots, k]

    std::vector<size_t> next_active;
    std::vector<int32_t> next_sources;    // [next slots] old slot of each new slot
    std::vector<int32_t> next_input_ids;  // [next slots]
    const auto keep_parked = [&](size_t index) {
      for (int32_t& slot : parked_slots[index]) {
        next_sources.push_back(slot);
        slot = static_cast<int32_t>(next_input_ids.size());
        next_input_ids.push_back(eos_id);
      }
      next_active.push_back(index);
    };
    for (size_t index : active) {
      if (!parked_slots[index].empty()) {
        keep_parked(index);
        continue;
      }
      SentenceBeam& sentence = sentences[index];
      // HF's forced EOS leaves EOS (log-prob 0) as the only continuation at the last allowed step.
      const bool forced = options.force_eos_at_max_length && sentence.generated == sentence.max_generated - 1;
      const float zero = 0.0f;
      TopCandidates top(2 * settings.beam_size);
      for (size_t beam = 0; beam < sentence.running.size(); ++beam) {
        const RunningBeam& running = sentence.running[beam];
        const size_t row = static_cast<size_t>(running.slot) * static_cast<size_t>(k);
        if (forced)
          top.offer_candidates(static_cast<int32_t>(beam), running.log_prob, &eos_id, &zero, 1, vocab);
        else
          top.offer_candidates(static_cast<int32_t>(beam), running.log_prob, &candidates.ids[row],
                               &candidates.log_probs[row], k, vocab);
      }
      SEQTRANS_CHECK(!top.ranked().empty(), "sentence {}: no token has a finite score at step {}", index,
                     sentence.generated);
      std::vector<int32_t> held_slots;  // this step's slots of the sentence, kept if it is done (naive)
      if (!options.shrink_batch)
        for (const RunningBeam& running : sentence.running) held_slots.push_back(running.slot);
      advance(sentence, top.ranked(), settings);

      if (sentence.done) {
        results[index] = collect_result(sentence, options.num_hypotheses);
        sentence = SentenceBeam{};
        --remaining;
        if (!options.shrink_batch) {
          // A constant batch: the sentence keeps beam_size slots (its first step had only one).
          held_slots.resize(settings.beam_size, held_slots.front());
          parked_slots[index] = std::move(held_slots);
          keep_parked(index);
        }
        continue;
      }
      next_active.push_back(index);
      for (RunningBeam& running : sentence.running) {
        next_sources.push_back(running.slot);
        running.slot = static_cast<int32_t>(next_input_ids.size());
        next_input_ids.push_back(running.tokens.back());
      }
    }

    if (remaining == 0) break;
    // One select per step reorders beams, expands first-step slots to beams and drops done sentences.
    if (!is_identity_selection(next_sources, static_cast<int64_t>(input_ids.size()))) model.select(*state, next_sources);
    active = std::move(next_active);
    input_ids = std::move(next_input_ids);
  }
  return results;
}

}  // namespace seqtrans
