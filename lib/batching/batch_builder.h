// Batcher: cuts a window of tokenized sentences into length-sorted mini-batches under a token budget.
#pragma once

#include <cstddef>
#include <vector>

#include "batching/options.h"

namespace seqtrans {

// One sentence to batch: its index (the caller's handle, e.g. its position in the window) and its
// source length in tokens, EOS included.
struct SentenceLength {
  size_t index = 0;
  size_t length = 0;
};

// A mini-batch: the indices of its sentences, longest first, and that longest length.
struct Batch {
  std::vector<size_t> indices;
  size_t max_length = 0;
};

// Groups sentences of similar length so that little of each batch is padding.
// Sentences are sorted longest first (stable, so ties keep input order): the first batch then holds the
// window's longest sentences, its most memory-hungry shape (attention grows with length squared, and
// target length follows source length), so memory pools grow once and an out-of-memory shows up at
// once instead of after minutes; and a batch's padded length is simply its first sentence's length.
// A batch then takes the following sentences while sentences x max_length <= max_batch_tokens and
// sentences <= max_batch_size; a sentence longer than the whole budget goes alone into its own batch.
class Batcher {
 public:
  explicit Batcher(const BatchingOptions& options);

  std::vector<Batch> make_batches(const std::vector<SentenceLength>& sentences) const;

 private:
  BatchingOptions options_;
};

}  // namespace seqtrans
