// Group beam search mirroring transformers 4.x (4.4x to 4.55, the last releases that had it)
// GenerationMixin._group_beam_search with BeamSearchScorer(num_beam_groups=G) and BeamHypotheses, for one
// EOS id and do_sample=False. The beam of B splits into G groups of S = B / G beams. Per step, group by
// group in order:
//  1. Token scores of each of the group's beams: log_softmax of the logits, then HF's processors in HF's
//     order: the Hamming diversity penalty (diversity_penalty x how many beams of earlier groups took the
//     token at this step; a done group counts as taking the pad id S times, the pad taken to be the
//     decoder start id as in Marian models), the repetition controls, the suppressed ids, EOS before the
//     minimum length, forced EOS at the limit. The model applies the repetition penalty before this code
//     sees the scores; for an id of the beam's history that the diversity penalty hits too, HF's order
//     (penalty of the diversity-penalized score) is restored by undoing the repetition penalty first, which
//     can differ from HF in the last bit.
//  2. Candidates: the best 2S (beam, token) pairs of the group by beam score + token score (fp32), ties
//     to the lower flat index beam * V + token (torch.topk leaves that open).
//  3. BeamSearchScorer.process: in rank order an EOS candidate of rank < S finishes (score = sum /
//     (generated length, EOS included) ^ length_penalty, in double), later EOS candidates are dropped,
//     and the first S others run on. Then the group is done (for good) once BeamHypotheses.is_done holds
//     for the best candidate's score: S hypotheses finished and FirstComplete, or the best candidate
//     / L ^ length_penalty <= the worst finished score, with L the generated length (the maximum length
//     for Never with length_penalty > 0).
//  4. BeamHypotheses.add keeps S hypotheses per group: a new one enters when there is room or it beats
//     the worst strictly; then the worst (the earliest of equals) leaves.
// The sentence stops when every group is done or at the maximum length; then (finalize) the running beams
// of the groups not done join their group's hypotheses unfinished, and the best num_hypotheses of all the
// groups' hypotheses come out: a stable ascending sort read from the end, so of equal scores the later
// group's (and within a group the later entry) comes first.
// Not mirrored: HF starts each group with one real beam and S - 1 placeholders scored -1e9, keeps 2S
// candidates even when some are -inf or placeholders, and keeps stepping done groups. We take only real,
// finite candidates and drop done groups' rows; results agree whenever a group has enough finite
// candidates (test/search/hf_generation_reference.py leaves out the cases where it has not).
#include "search/group_beam_search.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "core/error.h"
#include "search/search_common.h"

namespace seqtrans {

namespace {

// A running beam of a group.
struct GroupBeam {
  std::vector<int32_t> tokens;  // generated ids so far
  float log_prob = 0.0f;        // HF's beam score: the sum of processed token scores
  int32_t slot = 0;             // its slot (among the sentence's) in the current step
};

// A (beam, token) continuation of one group at one step.
struct GroupCandidate {
  float score = 0.0f;
  int64_t flat_index = 0;  // beam * vocab + token, beam within the group: the tie order
  int32_t beam = 0;
  int32_t token = 0;
};

bool ranks_before(const GroupCandidate& a, const GroupCandidate& b) {
  return a.score > b.score || (a.score == b.score && a.flat_index < b.flat_index);
}

struct FinishedEntry {
  double score = 0.0;
  std::vector<int32_t> tokens;  // without EOS
  bool finished = true;         // false when cut by the maximum length
};

// HF 4.x BeamHypotheses: a group's finished hypotheses, at most `capacity`, scores in double.
class GroupHypotheses {
 public:
  GroupHypotheses(size_t capacity, double length_penalty) : capacity_(capacity), length_penalty_(length_penalty) {}

  void add(std::vector<int32_t> tokens, float sum_log_probs, int generated, bool finished) {
    const double score = static_cast<double>(sum_log_probs) / std::pow(static_cast<double>(generated), length_penalty_);
    if (entries_.size() >= capacity_ && !(score > worst_)) return;
    entries_.push_back(FinishedEntry{score, std::move(tokens), finished});
    if (entries_.size() <= capacity_) {
      worst_ = std::min(score, worst_);
      return;
    }
    // The lowest score leaves, the earliest of equals (HF sorts (score, index) pairs).
    const auto lowest = std::min_element(entries_.begin(), entries_.end(),
                                         [](const FinishedEntry& a, const FinishedEntry& b) { return a.score < b.score; });
    entries_.erase(lowest);
    worst_ = std::min_element(entries_.begin(), entries_.end(), [](const FinishedEntry& a, const FinishedEntry& b) {
               return a.score < b.score;
             })->score;
  }

  // HF 4.x BeamHypotheses.is_done for the best candidate's score after `generated` tokens.
  bool is_done(float best, int generated, int max_generated, BeamStopping stopping) const {
    if (entries_.size() < capacity_) return false;
    if (stopping == BeamStopping::FirstComplete) return true;
    const int length = stopping == BeamStopping::Never && length_penalty_ > 0.0 ? max_generated : generated;
    const double highest = static_cast<double>(best) / std::pow(static_cast<double>(length), length_penalty_);
    return worst_ >= highest;
  }

  const std::vector<FinishedEntry>& entries() const { return entries_; }

 private:
  size_t capacity_;
  double length_penalty_;
  std::vector<FinishedEntry> entries_;
  double worst_ = 1e9;  // HF's starting value
};

struct Group {
  std::vector<GroupBeam> running;
  GroupHypotheses finished;
  bool done = false;
};

// How many beams of earlier groups took each id at this step, as (id, count) pairs (a handful of ids).
class TokenCounts {
 public:
  void clear() { counts_.clear(); }
  void add(int32_t id, int32_t times = 1) {
    for (auto& entry : counts_)
      if (entry.first == id) {
        entry.second += times;
        return;
      }
    counts_.emplace_back(id, times);
  }
  int32_t of(int32_t id) const {
    for (const auto& entry : counts_)
      if (entry.first == id) return entry.second;
    return 0;
  }

 private:
  std::vector<std::pair<int32_t, int32_t>> counts_;
};

}  // namespace

int group_beam_candidates(const SearchOptions& options) {
  const int group_size = options.beam_size / options.beam_groups;
  return group_size * (options.beam_groups + 1);
}

// One sentence's group beam: the running beams of the groups not done, group after group, are its slots.
class GroupBeamSentence : public SentenceSearch {
 public:
  GroupBeamSentence(const StepModel& model, const SearchOptions& options, const SentenceLimits& limits)
      : eos_id_(model.eos_id()),
        start_id_(model.decoder_start_id()),
        vocab_(model.target_vocab_size()),
        group_size_(static_cast<size_t>(options.beam_size / options.beam_groups)),
        diversity_penalty_(options.diversity_penalty),
        repetition_penalty_(options.repetition_penalty),
        stopping_(options.beam_stopping),
        min_length_(limits.min_length),
        max_generated_(limits.max_generated),
        prefix_(limits.prefix),
        prompt_(limits.prompt()),
        num_hypotheses_(options.num_hypotheses),
        force_eos_at_max_length_(options.force_eos_at_max_length) {
    // Each group starts with one real beam (HF's others are -1e9 placeholders), in its own slot.
    for (int g = 0; g < options.beam_groups; ++g) {
      groups_.push_back(Group{{GroupBeam{{}, 0.0f, g}}, GroupHypotheses(group_size_, options.length_penalty), false});
      inputs_.push_back(start_id_);
    }
  }

  const std::vector<int32_t>& inputs() const override { return inputs_; }
  bool eos_banned(int steps_ahead) const override { return generated_ + steps_ahead < min_length_; }
  bool done() const override { return done_; }

  void add_histories(std::vector<std::vector<int32_t>>& histories) const override {
    for (const Group& group : groups_) {
      if (group.done) continue;
      for (const GroupBeam& beam : group.running) histories.push_back(decoder_history(start_id_, beam.tokens));
    }
  }

  void advance(const SlotOutputs& outputs, std::vector<int32_t>& continuing) override {
    continuing.clear();
    SEQTRANS_CHECK(!done_, "group beam search: the sentence is already done");
    taken_.clear();
    bool any_candidate = false;
    for (Group& group : groups_) {
      if (static_cast<size_t>(generated_) < prefix_.size()) {
        // Every group's one beam runs through the prefix, each forced token adding 0 (CTranslate2's prefix).
        group.running.front().tokens.push_back(prefix_[static_cast<size_t>(generated_)]);
        any_candidate = true;
        continue;
      }
      if (group.done) {
        taken_.add(start_id_, static_cast<int32_t>(group_size_));  // HF pads a done group's beams
        continue;
      }
      rank_candidates(group, outputs);
      any_candidate |= !ranked_.empty();
      process(group);
      for (const GroupBeam& beam : group.running) taken_.add(beam.tokens.back());
    }
    SEQTRANS_CHECK(any_candidate, "no token has a finite score at step {}", generated_);
    generated_ += 1;
    const bool all_done = std::all_of(groups_.begin(), groups_.end(), [](const Group& group) { return group.done; });
    if (all_done || generated_ >= max_generated_) {
      finalize();
      return;
    }
    inputs_.clear();
    int32_t slot = 0;
    for (Group& group : groups_) {
      if (group.done) continue;
      for (GroupBeam& beam : group.running) {
        continuing.push_back(beam.slot);
        beam.slot = slot++;
        inputs_.push_back(beam.tokens.back());
      }
    }
  }

  SearchResult take_result() override {
    SEQTRANS_CHECK(done_, "group beam search: result taken before the sentence is done");
    std::vector<const FinishedEntry*> all;
    for (const Group& group : groups_)
      for (const FinishedEntry& entry : group.finished.entries()) all.push_back(&entry);
    std::stable_sort(all.begin(), all.end(),
                     [](const FinishedEntry* a, const FinishedEntry* b) { return a->score < b->score; });
    SearchResult result;
    for (auto entry = all.rbegin(); entry != all.rend(); ++entry) {
      if (static_cast<int>(result.hypotheses.size()) == num_hypotheses_) break;
      result.hypotheses.push_back(
          Hypothesis{(*entry)->tokens, static_cast<float>((*entry)->score), (*entry)->finished});
    }
    return result;
  }

 private:
  // The group's best 2S finite candidates into ranked_, best first.
  void rank_candidates(const Group& group, const SlotOutputs& outputs) {
    ranked_.clear();
    const StepCandidates& candidates = *outputs.candidates;
    const bool forced = force_eos_at_max_length_ && generated_ == max_generated_ - 1;
    const bool banned = eos_banned(0);
    for (size_t b = 0; b < group.running.size(); ++b) {
      const GroupBeam& beam = group.running[b];
      const int32_t beam_index = static_cast<int32_t>(b);
      if (forced) {  // HF's forced EOS leaves EOS (0) as the only continuation, after the diversity penalty
        ranked_.push_back(GroupCandidate{beam.log_prob, beam_index * vocab_ + eos_id_, beam_index, eos_id_});
        continue;
      }
      const size_t row = static_cast<size_t>(outputs.first_slot + beam.slot) * static_cast<size_t>(candidates.k);
      for (int i = 0; i < candidates.k; ++i) {
        const int32_t token = candidates.ids[row + i];
        if (token == eos_id_ && banned) continue;
        const float score = beam.log_prob + diversified(beam, token, candidates.log_probs[row + i]);
        if (!(score > -std::numeric_limits<float>::infinity())) continue;
        ranked_.push_back(GroupCandidate{score, beam_index * vocab_ + token, beam_index, token});
      }
    }
    std::sort(ranked_.begin(), ranked_.end(), ranks_before);
    if (ranked_.size() > 2 * group_size_) ranked_.resize(2 * group_size_);
  }

  // A token's score after the diversity penalty, with the repetition penalty (already in `score`) applied
  // after it, as HF orders its processors.
  float diversified(const GroupBeam& beam, int32_t token, float score) const {
    // HF subtracts penalty x frequency, both in fp32.
    const float penalty = diversity_penalty_ * static_cast<float>(taken_.of(token));
    if (penalty == 0.0f || repetition_penalty_ == 1.0f || !in_history(beam, token)) return score - penalty;
    const float unpenalized = score < 0.0f ? score / repetition_penalty_ : score * repetition_penalty_;
    const float diverse = unpenalized - penalty;
    return diverse < 0.0f ? diverse * repetition_penalty_ : diverse / repetition_penalty_;
  }

  // Forced prompt tokens: lengths count the tokens after them (HF's decoder_prompt_len).
  int prompt() const { return prompt_; }

  bool in_history(const GroupBeam& beam, int32_t token) const {
    return token == start_id_ || std::find(beam.tokens.begin(), beam.tokens.end(), token) != beam.tokens.end();
  }

  // BeamSearchScorer.process for one group: finished hypotheses, the next running beams, done.
  void process(Group& group) {
    std::vector<GroupBeam> running;
    for (size_t rank = 0; rank < ranked_.size() && running.size() < group_size_; ++rank) {
      const GroupCandidate& candidate = ranked_[rank];
      const GroupBeam& parent = group.running[static_cast<size_t>(candidate.beam)];
      if (candidate.token == eos_id_) {
        if (rank >= group_size_) continue;  // an EOS ranked past the group's size is dropped
        group.finished.add(parent.tokens, candidate.score, generated_ + 1 - prompt(), /*finished=*/true);
        continue;
      }
      GroupBeam beam;
      beam.tokens = extended(parent.tokens, candidate.token);
      beam.log_prob = candidate.score;
      beam.slot = parent.slot;
      running.push_back(std::move(beam));
    }
    if (!ranked_.empty())
      group.done = group.finished.is_done(ranked_.front().score, generated_ + 1 - prompt(), max_generated_ - prompt(),
                                          stopping_);
    group.running = std::move(running);
    // A group left without running beams cannot go on (HF would run placeholder beams).
    if (group.running.empty()) group.done = true;
  }

  // HF finalize: the running beams of the groups not done join their hypotheses, unfinished.
  void finalize() {
    for (Group& group : groups_) {
      if (group.done) continue;
      for (GroupBeam& beam : group.running)
        group.finished.add(std::move(beam.tokens), beam.log_prob, generated_ - prompt(), /*finished=*/false);
      group.running.clear();
    }
    done_ = true;
  }

  int32_t eos_id_;
  int32_t start_id_;
  int64_t vocab_;
  size_t group_size_;
  float diversity_penalty_;
  float repetition_penalty_;
  BeamStopping stopping_;
  int min_length_;
  int max_generated_;
  std::vector<int32_t> prefix_;
  int prompt_ = 0;  // of prefix_, the tokens lengths do not count
  int num_hypotheses_;
  bool force_eos_at_max_length_;
  int generated_ = 0;  // tokens every running beam has generated
  bool done_ = false;
  std::vector<Group> groups_;
  std::vector<int32_t> inputs_;  // [slots]
  std::vector<GroupCandidate> ranked_;
  TokenCounts taken_;  // ids taken by the groups already stepped, at this step
};

std::unique_ptr<SentenceSearch> make_group_beam_sentence(const StepModel& model, const SearchOptions& options,
                                                         const SentenceLimits& limits) {
  return std::make_unique<GroupBeamSentence>(model, options, limits);
}

}  // namespace seqtrans
