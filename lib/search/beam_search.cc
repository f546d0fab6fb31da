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
#include "search/search.h"
#include "search/search_common.h"

namespace seqtrans {

namespace {

// The tokens of one sentence's hypotheses as a tree: node i holds a token and the node before it (-1 for
// none), so a step extends a beam by one entry instead of copying its whole prefix; a hypothesis' tokens are
// spelled out only when it finishes (or when repetition controls need the histories).
class TokenTrail {
 public:
  static constexpr int32_t kEmpty = -1;
  int32_t extend(int32_t node, int32_t token) {
    tokens_.push_back(token);
    previous_.push_back(node);
    return static_cast<int32_t>(tokens_.size()) - 1;
  }
  int32_t token(int32_t node) const { return tokens_[static_cast<size_t>(node)]; }
  std::vector<int32_t> spell(int32_t node) const {
    std::vector<int32_t> tokens;
    for (; node != kEmpty; node = previous_[static_cast<size_t>(node)]) tokens.push_back(token(node));
    std::reverse(tokens.begin(), tokens.end());
    return tokens;
  }

 private:
  std::vector<int32_t> tokens_;
  std::vector<int32_t> previous_;
};

// A running hypothesis of one sentence's beam.
struct RunningBeam {
  int32_t node = TokenTrail::kEmpty;  // its last generated token in the sentence's trail
  float log_prob = 0.0f;              // accumulated processed log-probs (HF running_beam_scores)
  int32_t parent = 0;                 // the beam of the last step whose decoder state it continues
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
  void clear() { ranked_.clear(); }

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
  int max_generated = 1;                     // the prefix included
  int prompt = 0;                            // forced prefix tokens: lengths count the tokens after them
  int generated = 0;                         // tokens generated by every running beam, the prefix included
  TokenTrail trail;                          // every running beam's tokens
  std::vector<RunningBeam> running;          // best first (HF order)
  std::vector<RunningBeam> next;             // the next step's, built beside `running` (capacity reused)
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
  const int length = sentence.generated + 1 - sentence.prompt;
  const size_t finish_ranks = std::min(settings.beam_size, ranked.size());
  bool added = false;
  for (size_t rank = 0; rank < finish_ranks; ++rank) {
    const Candidate& candidate = ranked[rank];
    const bool ended_with_eos = candidate.token == settings.eos_id;
    if (!ended_with_eos && !reached_max) continue;
    FinishedHypothesis hypothesis;
    hypothesis.tokens = sentence.trail.spell(sentence.running[candidate.beam].node);
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

// The next running beams, in sentence.next.
void next_running(SentenceBeam& sentence, const std::vector<Candidate>& ranked, bool reached_max,
                  const BeamSettings& settings) {
  std::vector<RunningBeam>& running = sentence.next;
  running.clear();
  if (reached_max) return;
  for (const Candidate& candidate : ranked) {
    if (candidate.token == settings.eos_id) continue;
    const RunningBeam& parent = sentence.running[candidate.beam];
    running.push_back(
        RunningBeam{sentence.trail.extend(parent.node, candidate.token), candidate.log_prob, candidate.beam});
    if (running.size() == settings.beam_size) break;
  }
}

bool still_improvable(const SentenceBeam& sentence, const BeamSettings& settings) {
  if (!sentence.improvable) return false;
  if (sentence.finished.size() < settings.beam_size) return true;
  if (sentence.running.empty()) return false;
  const int best_length = settings.stopping == BeamStopping::Never && settings.length_penalty > 0.0f
                              ? sentence.max_generated - sentence.prompt
                              : sentence.generated - sentence.prompt;
  const float best_possible =
      length_normalized(sentence.running.front().log_prob, best_length, settings.length_penalty);
  return best_possible > sentence.finished.back().score;
}

// One beam search step of one sentence, given its ranked candidates.
void advance_beam(SentenceBeam& sentence, const std::vector<Candidate>& ranked, const BeamSettings& settings) {
  const bool reached_max = sentence.generated + 1 >= sentence.max_generated;
  add_finished(sentence, ranked, reached_max, settings);
  next_running(sentence, ranked, reached_max, settings);
  std::swap(sentence.running, sentence.next);
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

// One sentence's beam: running beam i sits in the sentence's slot i during a step.
class BeamSentence : public SentenceSearch {
 public:
  BeamSentence(const StepModel& model, const SearchOptions& options, const SentenceLimits& limits)
      : settings_{static_cast<size_t>(options.beam_size), options.length_penalty, options.beam_stopping,
                  model.eos_id()},
        vocab_(model.target_vocab_size()),
        min_length_(limits.min_length),
        num_hypotheses_(options.num_hypotheses),
        force_eos_at_max_length_(options.force_eos_at_max_length),
        start_id_(model.decoder_start_id()),
        prefix_(limits.prefix),
        inputs_{model.decoder_start_id()},
        top_(2 * settings_.beam_size) {
    // One running beam to start with (HF's other beams are -1e9 placeholders).
    sentence_.max_generated = limits.max_generated;
    sentence_.prompt = limits.prompt();
    sentence_.running.push_back(RunningBeam{TokenTrail::kEmpty, 0.0f, 0});
  }

  const std::vector<int32_t>& inputs() const override { return inputs_; }
  bool eos_banned(int steps_ahead) const override { return sentence_.generated + steps_ahead < min_length_; }
  bool done() const override { return sentence_.done; }

  void add_histories(std::vector<std::vector<int32_t>>& histories) const override {
    for (const RunningBeam& beam : sentence_.running)
      histories.push_back(decoder_history(start_id_, sentence_.trail.spell(beam.node)));
  }

  void advance(const SlotOutputs& outputs, std::vector<int32_t>& continuing) override {
    continuing.clear();
    SEQTRANS_CHECK(!sentence_.done, "beam search: the sentence is already done");
    if (static_cast<size_t>(sentence_.generated) < prefix_.size()) {
      follow_prefix(continuing);
      return;
    }
    const StepCandidates& candidates = *outputs.candidates;
    // HF's forced EOS leaves EOS (log-prob 0) as the only continuation at the last allowed step.
    const bool forced = force_eos_at_max_length_ && sentence_.generated == sentence_.max_generated - 1;
    const bool banned = eos_banned(0);
    const float zero = 0.0f;
    TopCandidates& top = top_;
    top.clear();
    for (size_t beam = 0; beam < sentence_.running.size(); ++beam) {
      const float parent_log_prob = sentence_.running[beam].log_prob;
      if (forced) {
        top.offer_candidates(static_cast<int32_t>(beam), parent_log_prob, &settings_.eos_id, &zero, 1, vocab_);
        continue;
      }
      const size_t row = static_cast<size_t>(outputs.first_slot + static_cast<int64_t>(beam)) *
                         static_cast<size_t>(candidates.k);
      const int32_t* ids = candidates.ids.data() + row;
      const float* log_probs = candidates.log_probs.data() + row;
      int count = candidates.k;
      if (banned) {  // a copy without EOS
        drop_eos(ids, log_probs, count);
        ids = row_ids_.data();
        log_probs = row_log_probs_.data();
        count = static_cast<int>(row_ids_.size());
      }
      top.offer_candidates(static_cast<int32_t>(beam), parent_log_prob, ids, log_probs, count, vocab_);
    }
    SEQTRANS_CHECK(!top.ranked().empty(), "no token has a finite score at step {}", sentence_.generated);
    advance_beam(sentence_, top.ranked(), settings_);
    if (sentence_.done) return;
    inputs_.clear();
    for (RunningBeam& running : sentence_.running) {
      continuing.push_back(running.parent);
      inputs_.push_back(sentence_.trail.token(running.node));
    }
  }

  SearchResult take_result() override {
    SEQTRANS_CHECK(sentence_.done, "beam search: result taken before the sentence is done");
    return collect_result(sentence_, num_hypotheses_);
  }

 private:
  // One beam runs through the prefix, each forced token adding 0 (CTranslate2's hard prefix); the limits
  // leave room for at least one token after it.
  void follow_prefix(std::vector<int32_t>& continuing) {
    RunningBeam& beam = sentence_.running.front();
    const int32_t token = prefix_[static_cast<size_t>(sentence_.generated)];
    beam.node = sentence_.trail.extend(beam.node, token);
    beam.parent = 0;
    sentence_.generated += 1;
    inputs_.assign(1, token);
    continuing.push_back(0);
  }

  // A row that bans EOS got one candidate more than the beam needs: its candidates but EOS, into
  // row_ids_ and row_log_probs_.
  void drop_eos(const int32_t* ids, const float* log_probs, int count) {
    row_ids_.clear();
    row_log_probs_.clear();
    for (int i = 0; i < count; ++i) {
      if (ids[i] == settings_.eos_id) continue;
      row_ids_.push_back(ids[i]);
      row_log_probs_.push_back(log_probs[i]);
    }
  }

  BeamSettings settings_;
  int64_t vocab_;
  int min_length_;
  int num_hypotheses_;
  bool force_eos_at_max_length_;
  int32_t start_id_;
  std::vector<int32_t> prefix_;
  SentenceBeam sentence_;
  std::vector<int32_t> inputs_;  // [running beams]
  TopCandidates top_;            // this step's best 2 * beam_size continuations (capacity reused)
  std::vector<int32_t> row_ids_;  // a row without EOS (drop_eos), capacity reused
  std::vector<float> row_log_probs_;
};

std::unique_ptr<SentenceSearch> make_beam_sentence(const StepModel& model, const SearchOptions& options,
                                                   const SentenceLimits& limits) {
  return std::make_unique<BeamSentence>(model, options, limits);
}

}  // namespace seqtrans
