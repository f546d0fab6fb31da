// Hugging Face's repetition penalty and no-repeat-n-gram processors on the CPU: the reference for the
// CUDA kernel and for the model's host path.
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {
namespace {

// z = logits + bias, and with `normalize` z - logsumexp(z) (exp-sum in double, as log_softmax_topk).
void prepare_row(float* row, const float* bias, int64_t vocab, bool normalize) {
  float max = -std::numeric_limits<float>::infinity();
  for (int64_t i = 0; i < vocab; ++i) {
    if (bias) row[i] += bias[i];
    max = std::max(max, row[i]);
  }
  if (!normalize || max == -std::numeric_limits<float>::infinity()) return;
  double sum = 0.0;
  for (int64_t i = 0; i < vocab; ++i) sum += std::exp(static_cast<double>(row[i] - max));
  const float log_sum = static_cast<float>(std::log(sum));
  for (int64_t i = 0; i < vocab; ++i) row[i] = (row[i] - max) - log_sum;
}

// RepetitionPenaltyLogitsProcessor: each distinct id once (HF gathers, then scatters).
void penalize(float* row, const std::vector<int32_t>& ids, float penalty, std::vector<char>& seen) {
  for (int32_t id : ids) {
    if (seen[id]) continue;
    seen[id] = 1;
    row[id] = row[id] < 0.0f ? row[id] * penalty : row[id] / penalty;
  }
  for (int32_t id : ids) seen[id] = 0;
}

// NoRepeatNGramLogitsProcessor: the n-grams of the history whose first n - 1 ids are its last n - 1 ids
// ban their n-th id. Nothing is banned before the history holds n - 1 ids.
void ban_repeated_ngrams(float* row, const std::vector<int32_t>& ids, int n) {
  const int64_t length = static_cast<int64_t>(ids.size());
  if (length + 1 < n) return;
  for (int64_t start = 0; start + n <= length; ++start) {
    bool same = true;
    for (int64_t j = 0; j + 1 < n && same; ++j) same = ids[start + j] == ids[length - n + 1 + j];
    if (same) row[ids[start + n - 1]] = -std::numeric_limits<float>::infinity();
  }
}

}  // namespace

void penalize_repetitions(Tensor& logits, const Tensor& history, const Tensor& lengths,
                          const ops::RepetitionOptions& options) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1), capacity = history.dim(1);
  const float* bias = options.bias ? options.bias->data<float>() : nullptr;
  std::vector<char> seen(static_cast<size_t>(vocab), 0);
  std::vector<int32_t> ids;
  for (int64_t r = 0; r < rows; ++r) {
    const int32_t length = lengths.data<int32_t>()[r];
    SEQTRANS_CHECK(length >= 0 && length <= capacity, "penalize_repetitions: row {} has {} history ids of {}", r,
                   length, capacity);
    const int32_t* row_history = history.data<int32_t>() + r * capacity;
    ids.assign(row_history, row_history + length);
    for (int32_t id : ids)
      SEQTRANS_CHECK(id >= 0 && id < vocab, "penalize_repetitions: history id {} outside the vocabulary of {}", id,
                     vocab);
    float* row = logits.data<float>() + r * vocab;
    prepare_row(row, bias, vocab, options.normalize);
    if (options.penalty != 1.0f) penalize(row, ids, options.penalty, seen);
    if (options.no_repeat_ngram > 0) ban_repeated_ngrams(row, ids, options.no_repeat_ngram);
  }
}

}  // namespace seqtrans::cpu
