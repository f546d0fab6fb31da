#include "batching/batch_builder.h"

#include <algorithm>

#include "core/error.h"

namespace seqtrans {

Batcher::Batcher(const BatchingOptions& options) : options_(options) { validate(options_); }

std::vector<Batch> Batcher::make_batches(const std::vector<SentenceLength>& sentences) const {
  std::vector<SentenceLength> sorted = sentences;
  std::stable_sort(sorted.begin(), sorted.end(),
                   [](const SentenceLength& a, const SentenceLength& b) { return a.length > b.length; });
  std::vector<Batch> batches;
  for (const SentenceLength& sentence : sorted) {
    // Lengths only decrease, so the batch's padded length stays that of its first sentence.
    const bool fits = !batches.empty() && batches.back().indices.size() < options_.max_batch_size &&
                      (batches.back().indices.size() + 1) * batches.back().max_length <=
                          options_.max_batch_tokens;
    if (!fits) batches.push_back(Batch{{}, sentence.length});
    batches.back().indices.push_back(sentence.index);
  }
  return batches;
}

}  // namespace seqtrans
