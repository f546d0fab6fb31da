// A scripted StepModel for search tests: next-token logits are a function of (source, decoder prefix),
// and every step and select call is recorded, so tests can check exactly which hypotheses the search
// still computes (the shrinking batch) and how it rearranges slots.
#pragma once

#include <algorithm>
#include <cstdint>
#include <deque>
#include <functional>
#include <limits>
#include <memory>
#include <utility>
#include <vector>

#include "core/error.h"
#include "core/tensor.h"
#include "search/step_model.h"

namespace seqtrans {
namespace testing {

// Logits for one slot: `prefix` holds the decoder inputs so far, starting with the decoder start id.
using FakeLogitsFn = std::function<std::vector<float>(const std::vector<int32_t>& source,
                                                      const std::vector<int32_t>& prefix)>;  // -> [vocab]

// What one slot computed in one step.
struct FakeSlotRecord {
  size_t sentence = 0;
  std::vector<int32_t> prefix;  // decoder inputs including the one fed at this step
};

class FakeStepModel : public StepModel {
 public:
  FakeStepModel(int64_t vocab, int32_t eos_id, int32_t start_id, std::vector<int32_t> suppressed, FakeLogitsFn logits)
      : vocab_(vocab),
        eos_id_(eos_id),
        start_id_(start_id),
        suppressed_(std::move(suppressed)),
        logits_(std::move(logits)) {}

  // Greedy steps the session runs at once (StepModel::steps_per_read; the default runs them one by one).
  int steps_at_once = 1;
  int steps_per_read() const override { return steps_at_once; }

  int64_t target_vocab_size() const override { return vocab_; }
  int32_t eos_id() const override { return eos_id_; }
  int32_t decoder_start_id() const override { return start_id_; }
  std::vector<int32_t> suppressed_ids() const override { return suppressed_; }

  std::unique_ptr<DecoderState> start() override {
    auto state = std::make_unique<State>();
    state->room_slots = room_slots;
    return state;
  }

  // Sentences are numbered in admission order over the state's life (the first admit's are 0, 1, ...).
  void admit(DecoderState& decoder_state, const std::vector<std::vector<int32_t>>& sources) override {
    auto& state = dynamic_cast<State&>(decoder_state);
    check_memory(state.entries.size() + state.pending.size() + sources.size());
    if (reserved_limit_on_admit) check_reserved(state.reserved_slots);
    ++encode_calls;
    admitted.push_back(sources.size());
    for (const auto& source : sources) {
      if (admission_chunk == 0)
        state.entries.push_back(Slot{state.next_sentence++, source, {}});
      else
        state.pending.push_back(Pending{state.next_sentence++, source, source.size()});
    }
  }

  // Admission in chunks, as a decoder-only model's prefill: with admission_chunk > 0, admit() leaves its
  // sources admitting, and each continue_admission() takes up to admission_chunk of their ids, oldest source
  // first, joining the sources it completes.
  size_t admission_chunk = 0;
  int admission_calls = 0;       // continue_admission calls that did something
  int steps_while_admitting = 0;  // steps run while some source was admitting
  int admission_memory_errors = 0;  // continue_admission calls that ran out of memory
  void continue_admission(DecoderState& decoder_state) override {
    auto& state = dynamic_cast<State&>(decoder_state);
    if (state.pending.empty()) return;
    const int errors_before = out_of_memory_errors;
    try {
      check_memory(state.entries.size() + state.pending.size());
    } catch (const OutOfMemoryError&) {
      admission_memory_errors += out_of_memory_errors - errors_before;
      throw;
    }
    ++admission_calls;
    size_t budget = admission_chunk;
    for (Pending& pending : state.pending) {
      const size_t take = std::min(budget, pending.left);
      pending.left -= take;
      budget -= take;
      if (pending.left > 0) break;
    }
    while (!state.pending.empty() && state.pending.front().left == 0) {
      state.entries.push_back(Slot{state.pending.front().sentence, state.pending.front().source, {}});
      state.pending.pop_front();
    }
  }
  void withdraw_admitting(DecoderState& decoder_state, size_t count) override {
    auto& state = dynamic_cast<State&>(decoder_state);
    SEQTRANS_CHECK(count <= state.pending.size(), "fake withdraw: {} of {}", count, state.pending.size());
    state.pending.resize(state.pending.size() - count);
  }

  Tensor step(DecoderState& decoder_state, const std::vector<int32_t>& input_ids) override {
    auto& state = dynamic_cast<State&>(decoder_state);
    SEQTRANS_CHECK(input_ids.size() == state.entries.size(), "fake step: {} ids for {} slots", input_ids.size(),
                   state.entries.size());
    check_memory(state.entries.size() + state.pending.size());
    if (reserved_limit_on_step) check_reserved(state.reserved_slots);
    if (!state.pending.empty()) ++steps_while_admitting;
    std::vector<float> values;  // [slots, vocab]
    std::vector<FakeSlotRecord> record;
    for (size_t i = 0; i < input_ids.size(); ++i) {
      Slot& slot = state.entries[i];
      slot.prefix.push_back(input_ids[i]);
      const std::vector<float> row = logits_(slot.source, slot.prefix);  // [vocab]
      SEQTRANS_CHECK(static_cast<int64_t>(row.size()) == vocab_, "fake logits: {} values for vocab {}", row.size(),
                     vocab_);
      values.insert(values.end(), row.begin(), row.end());
      record.push_back(FakeSlotRecord{slot.sentence, slot.prefix});
    }
    steps.push_back(std::move(record));
    return Tensor::from_floats({static_cast<int64_t>(input_ids.size()), vocab_}, values);
  }

  // Enforces what the real model enforces: the slots that continue one sentence sit at one position.
  void select(DecoderState& decoder_state, const std::vector<int32_t>& sources) override {
    auto& state = dynamic_cast<State&>(decoder_state);
    std::vector<Slot> entries;
    for (int32_t source : sources) {
      SEQTRANS_CHECK(source >= 0 && static_cast<size_t>(source) < state.entries.size(), "fake select: slot {} of {}",
                     source, state.entries.size());
      for (const Slot& kept : entries)
        SEQTRANS_CHECK(kept.sentence != state.entries[source].sentence ||
                           kept.prefix.size() == state.entries[source].prefix.size(),
                       "fake select: slots of sentence {} at different positions", kept.sentence);
      entries.push_back(state.entries[source]);
    }
    state.entries = std::move(entries);
    selects.push_back(sources);
  }

  // Simulated device memory: admitting or stepping more slots than this (a source still admitting counts as
  // one) throws OutOfMemoryError, before anything changes (0 = no limit).
  size_t slot_limit = 0;
  // Pools reserved for more than this many slots leave no room for steps (as reserved rows do on a GPU):
  // every step fails until the state is reserved smaller (0 = no limit). Reserving more than slot_limit
  // fails as well.
  size_t reserved_slot_limit = 0;
  bool reserved_limit_on_admit = true;  // where the limit bites: a wave's encoder, a decoder step
  // The pools' room (DecoderState::room_left) of states started after it is set: slots may join while
  // all slots stay within it (0 = no limit). Unlike slot_limit, nothing fails past it.
  size_t room_slots = 0;
  bool reserved_limit_on_step = true;
  mutable int out_of_memory_errors = 0;
  mutable std::vector<int64_t> reservations;  // slots of each reserve call that succeeded
  void reserve(DecoderState& decoder_state, const DecoderReservation& reservation) const override {
    if (slot_limit > 0 && static_cast<size_t>(reservation.slots) > slot_limit) {
      ++out_of_memory_errors;
      throw OutOfMemoryError(fmt::format("fake model: {} reserved slots do not fit in {}", reservation.slots, slot_limit));
    }
    dynamic_cast<State&>(decoder_state).reserved_slots = static_cast<size_t>(reservation.slots);
    reservations.push_back(reservation.slots);
  }
  mutable int release_calls = 0;  // release_cached: what a real model's graphs hold goes back before a retry
  void release_cached(DecoderState& /*state*/) const override { ++release_calls; }

  // Slots computed by each step call, in call order.
  std::vector<std::vector<FakeSlotRecord>> steps;
  // Arguments of each select call.
  std::vector<std::vector<int32_t>> selects;
  // Sentences per admit call, and the number of admit calls.
  std::vector<size_t> admitted;
  int encode_calls = 0;

  // Total slot computations over all steps.
  size_t slot_steps() const {
    size_t total = 0;
    for (const auto& step : steps) total += step.size();
    return total;
  }

 private:
  void check_reserved(size_t reserved_slots) const {
    if (reserved_slot_limit == 0 || reserved_slots <= reserved_slot_limit) return;
    ++out_of_memory_errors;
    throw OutOfMemoryError(fmt::format("fake model: pools reserved for {} slots leave no room", reserved_slots));
  }
  void check_memory(size_t slots) const {
    if (slot_limit == 0 || slots <= slot_limit) return;
    ++out_of_memory_errors;
    throw OutOfMemoryError(fmt::format("fake model: {} slots do not fit in {}", slots, slot_limit));
  }

  struct Slot {
    size_t sentence;
    std::vector<int32_t> source;
    std::vector<int32_t> prefix;
  };
  struct Pending {
    size_t sentence;
    std::vector<int32_t> source;
    size_t left;  // ids not taken yet
  };
  struct State : DecoderState {
    std::vector<Slot> entries;  // one per slot
    std::deque<Pending> pending;  // admitting, oldest first
    size_t next_sentence = 0;
    size_t reserved_slots = 0;
    size_t room_slots = 0;
    int64_t slots() const override { return static_cast<int64_t>(entries.size()); }
    size_t admitting() const override { return pending.size(); }
    int64_t room_left() const override {
      return room_slots == 0 ? std::numeric_limits<int64_t>::max()
                             : static_cast<int64_t>(room_slots) - static_cast<int64_t>(entries.size() + pending.size());
    }
    int64_t room_needed(int64_t new_slots, int64_t /*new_positions*/) const override { return new_slots; }
  };

  int64_t vocab_;
  int32_t eos_id_;
  int32_t start_id_;
  std::vector<int32_t> suppressed_;
  FakeLogitsFn logits_;
};

}  // namespace testing
}  // namespace seqtrans
