// The search's only view of a model (docs/ARCHITECTURE.md §1): sentences are encoded into a running decoder state
// (at its start or while it runs), then each step scores one next token for every active decoder slot.
// Search code never sees layers, weights or devices.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "ops/ops.h"

namespace seqtrans {

// Opaque decoder state owned by the model: encoder memory, caches, positions. It holds one slot per
// active hypothesis, each at its own position; slots are rearranged only through StepModel::select and
// added only through StepModel::admit.
class DecoderState {
 public:
  virtual ~DecoderState() = default;
  virtual int64_t slots() const = 0;
  // Room in the pools for joining sentences, in the state's own units (cache blocks for the encoder-decoder
  // model): what is left once every running slot reaches its source's length (room_left), and what joining
  // slots expected to hold `new_positions` positions in all take (room_needed). The scheduler admits while
  // the need stays within what is left, so that joining sentences do not make the pools grow.
  virtual int64_t room_left() const { return std::numeric_limits<int64_t>::max(); }
  virtual int64_t room_needed(int64_t /*new_slots*/, int64_t /*new_positions*/) const { return 0; }
  // Sources admitted whose slots have not joined yet (StepModel::continue_admission).
  virtual size_t admitting() const { return 0; }
};

// Hugging Face's repetition controls for one step (ops::penalize_repetitions): each slot's decoder inputs so
// far, HF's input_ids (the start id, the generated ids, the id fed at this step).
struct RepetitionRequest {
  float penalty = 1.0f;     // HF repetition_penalty; 1 = off
  int no_repeat_ngram = 0;  // HF no_repeat_ngram_size; 0 = off
  // Beam search: HF applies its processors to log-probs (log_softmax first), greedy search and sampling to
  // the logits.
  bool on_log_probs = false;
  std::vector<std::vector<int32_t>> histories;  // [slots][ids]

  bool on() const { return penalty != 1.0f || no_repeat_ngram > 0; }
};

// Applies `request` to scores [slots, V] in place (the logits, without their bias: `bias` [V] is added
// first), on the scores' device. Leaves log-probs when request.on_log_probs.
void apply_repetition_controls(Tensor& scores, const RepetitionRequest& request, const Tensor* bias);

// What search asks of one decoding step when it needs only the best continuations (greedy, beam).
struct CandidateRequest {
  int k = 1;                            // continuations per slot, 1 <= k <= vocabulary size
  std::vector<int32_t> suppressed_ids;  // set to -inf after log_softmax (Hugging Face's order)
  RepetitionRequest repetitions;        // applied before the selection (and the suppression)
};

// Per slot, the k best next tokens by log-prob (log_softmax over the whole vocabulary, then the
// suppressed ids masked), best first, ties to the lower id; a row with fewer finite entries ends in -inf.
// With repetition controls, the log-probs are those of the processed logits (greedy) or the processed
// log-probs themselves (beam search, RepetitionRequest::on_log_probs).
struct StepCandidates {
  int64_t slots = 0;
  int k = 0;
  std::vector<float> log_probs;  // [slots, k]
  std::vector<int32_t> ids;      // [slots, k]
};

// What search asks of one decoding step when it samples: one draw per slot (ops::sample_tokens).
struct SampleRequest {
  std::vector<int32_t> suppressed_ids;  // never drawn, for every slot
  std::vector<ops::SamplingRow> rows;   // [slots] each slot's settings and random stream
  RepetitionRequest repetitions;        // applied to the logits before the draw
};

// Per slot, the drawn token and its log-prob (log_softmax of the logits, before the sampling filters).
struct StepSamples {
  std::vector<int32_t> ids;      // [slots], -1 where no token could be drawn
  std::vector<float> log_probs;  // [slots]
};

// Throws unless `request` is one that step_candidates_run takes: the best candidate only (k = 1), without
// repetition controls (whose histories need the host's tokens).
void check_run_request(const CandidateRequest& request);

// Bounds of a run, for StepModel::reserve; 0 leaves a bound to grow on demand.
struct DecoderReservation {
  int64_t slots = 0;          // hypotheses decoded at once (beam_size per sentence)
  int64_t sentences = 0;      // sentences in flight
  int64_t source_length = 0;  // longest source, EOS included
  int64_t source_tokens = 0;  // source ids in flight at once, summed (the encoder memory they hold)
  int64_t target_length = 0;  // longest output, EOS included
};

class StepModel {
 public:
  virtual ~StepModel() = default;

  virtual int64_t target_vocab_size() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual int32_t decoder_start_id() const = 0;
  // Ids the model must never emit (e.g. Marian's pad); search masks them after normalization.
  virtual std::vector<int32_t> suppressed_ids() const = 0;
  // Longest output the model can produce after a source of `source_length` ids (the positions its decoder
  // has left); search caps every sentence's length.
  virtual int max_target_length(size_t source_length) const {
    (void)source_length;
    return std::numeric_limits<int>::max();
  }

  // Whether the repetition controls read the source before the generated tokens (a decoder-only model's
  // prompt is part of its sequence, as in Hugging Face's input_ids) instead of the decoder start id.
  virtual bool prompt_in_history() const { return false; }

  // A state with no slots.
  virtual std::unique_ptr<DecoderState> start() = 0;
  // Encodes `sources` (token ids, EOS included) and appends one slot per source, at position 0, after the
  // state's current slots: old slots keep their numbers, slot slots() + i decodes sources[i]. A model may
  // instead leave some or all of them admitting (DecoderState::admitting), to join in later calls of
  // continue_admission; sources join in the order they were admitted, each as one new slot after the
  // state's current ones. If admit throws, none of `sources` was admitted.
  virtual void admit(DecoderState& state, const std::vector<std::vector<int32_t>>& sources) = 0;
  // Does a bounded share of the admitting sources' work (a decoder-only model's chunked prefill: one chunk
  // of prompt tokens) and joins those it completes, oldest first, so that decoding steps of the joined
  // slots can run between the shares. If it throws (out of memory), nothing joined and the call can be
  // retried. A model whose admit() joins every source has nothing to do here.
  virtual void continue_admission(DecoderState& /*state*/) {}
  // The newest `count` admitting sources leave without joining, and what they took goes back (eviction).
  virtual void withdraw_admitting(DecoderState& state, size_t count);
  // Sizes the state's pools up front, so that a run within these bounds never moves them (a move costs
  // the recorded step graphs). Optional: pools also grow on demand.
  virtual void reserve(DecoderState& /*state*/, const DecoderReservation& /*reservation*/) const {}
  // Gives back what the state holds only for speed (recorded step graphs and their temporaries): called
  // when the device ran out of memory, before fewer sentences retry.
  virtual void release_cached(DecoderState& /*state*/) const {}
  // A new state whose slot i decodes sources[i] (every admission completed).
  std::unique_ptr<DecoderState> encode(const std::vector<std::vector<int32_t>>& sources);

  // Feeds one token per slot ([slots]) and returns next-token logits, the output bias included.
  // Returns [slots, target_vocab_size], fp32.
  virtual Tensor step(DecoderState& state, const std::vector<int32_t>& input_ids) = 0;

  // Feeds one token per slot and returns the k best continuations of every slot. The default normalizes
  // the logits of step() on the host; models override it to select on the device (fused output layer),
  // so that only [slots, k] values cross to the host.
  virtual void step_candidates(DecoderState& state, const std::vector<int32_t>& input_ids,
                               const CandidateRequest& request, StepCandidates& candidates);

  // Several greedy steps before the host reads any (requests.size() of them, each k = 1 and without
  // repetition controls): the first feeds `input_ids`, each later one feeds every slot the best candidate
  // the step before chose for it, and no slot is reordered in between. candidates[j] gets step j's. The
  // default steps one at a time, feeding on the host; a model on a GPU feeds on the device and copies all
  // the steps' candidates back at once, so the host's round trip is paid once for them.
  virtual void step_candidates_run(DecoderState& state, const std::vector<int32_t>& input_ids,
                                   const std::vector<CandidateRequest>& requests,
                                   std::vector<StepCandidates>& candidates);
  // How many greedy steps the session should run at once (step_candidates_run) when nothing else needs the
  // host in between: 1 where running them at once saves nothing.
  virtual int steps_per_read() const { return 1; }

  // Feeds one token per slot and draws each slot's next token. The default samples the logits of step() on
  // the host; models override it to sample on the device, so that only [slots] values cross to the host.
  virtual void step_samples(DecoderState& state, const std::vector<int32_t>& input_ids, const SampleRequest& request,
                            StepSamples& samples);

  // Rebuilds the state so that new slot i continues old slot `sources[i]`. Serves beam reordering,
  // expanding one slot per sentence into beam-size slots, and dropping finished slots (the shrinking batch).
  // The slots that continue one sentence must all sit at one position (a sentence's beams step together);
  // a sentence left with no slot is released, and its memory and cache rows go back to the model's pools.
  virtual void select(DecoderState& state, const std::vector<int32_t>& sources) = 0;
};

}  // namespace seqtrans
