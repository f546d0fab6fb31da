// The search's only view of a model (DESIGN.md §4): encode a batch once, then score one next token
// for every active decoder slot. Search code never sees layers, weights or devices.
#pragma once

#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "core/tensor.h"

namespace seqtrans {

// Opaque per-batch decoder state owned by the model: encoder memory, caches, positions.
// It holds one slot per active hypothesis; slots are rearranged only through StepModel::select.
class DecoderState {
 public:
  virtual ~DecoderState() = default;
  virtual int64_t slots() const = 0;
};

class StepModel {
 public:
  virtual ~StepModel() = default;

  virtual int64_t target_vocab_size() const = 0;
  virtual int32_t eos_id() const = 0;
  virtual int32_t decoder_start_id() const = 0;
  // Ids the model must never emit (e.g. Marian's pad); search masks them after normalization.
  virtual std::vector<int32_t> suppressed_ids() const = 0;
  // Longest output the model can produce (its decoder positions); search caps every sentence's length.
  virtual int max_target_length() const { return std::numeric_limits<int>::max(); }

  // Encodes `sources` (token ids, EOS included); the new state has slot i = sentence i.
  virtual std::unique_ptr<DecoderState> encode(const std::vector<std::vector<int32_t>>& sources) = 0;

  // Feeds one token per slot ([slots]) and returns next-token logits, the output bias included.
  // Returns [slots, target_vocab_size], fp32.
  virtual Tensor step(DecoderState& state, const std::vector<int32_t>& input_ids) = 0;

  // Rebuilds the state so that new slot i continues old slot `sources[i]`. Serves beam reordering,
  // expanding one slot per sentence into beam-size slots, and dropping finished slots (the shrinking batch).
  virtual void select(DecoderState& state, const std::vector<int32_t>& sources) = 0;
};

}  // namespace seqtrans
