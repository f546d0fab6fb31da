#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/thread_pool.h"
#include "cpu/vector_math.h"

namespace seqtrans::cpu {
namespace {

constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();

// The k best of a row, ranked by (value descending, id ascending), kept sorted while the row is scanned
// once in id order: a value enters only if it beats the k-th (an equal one has a larger id and does not).
class TopK {
 public:
  explicit TopK(int k) : k_(k), values_(static_cast<size_t>(k)), ids_(static_cast<size_t>(k)) {}

  void clear() { size_ = 0; }

  void offer(float value, int32_t id) {
    if (size_ == k_ && !(value > values_[k_ - 1])) return;
    int slot = size_ < k_ ? size_++ : k_ - 1;
    for (; slot > 0 && value > values_[slot - 1]; --slot) {
      values_[slot] = values_[slot - 1];
      ids_[slot] = ids_[slot - 1];
    }
    values_[slot] = value;
    ids_[slot] = id;
  }

  float value(int i) const { return values_[i]; }
  int32_t id(int i) const { return ids_[i]; }

 private:
  int k_, size_ = 0;
  std::vector<float> values_;
  std::vector<int32_t> ids_;
};

// One row: z = logits + bias (NaN as -inf), normalized, suppressed ids at -inf, its k best into `best`.
// row: [vocab] scratch. Built for AVX2 as well as the baseline (the same operations, so the same bits).
#if defined(__x86_64__)
__attribute__((target_clones("avx2", "default")))
#endif
void select_row(const float* in, const float* bias, int64_t vocab, bool normalize, const int32_t* suppressed,
                int64_t suppressed_count, float* row, TopK& best) {
  float max_value = kMinusInfinity;
  for (int64_t i = 0; i < vocab; ++i) {
    const float z = bias ? in[i] + bias[i] : in[i];
    row[i] = z != z ? kMinusInfinity : z;  // NaN never wins
    max_value = row[i] > max_value ? row[i] : max_value;
  }
  // Normalizer with the exp-sum in double; an all -inf row stays -inf.
  if (normalize && max_value != kMinusInfinity) {
    const float log_sum = static_cast<float>(std::log(exp_sum(row, vocab, max_value)));
    for (int64_t i = 0; i < vocab; ++i) row[i] = (row[i] - max_value) - log_sum;
  }
  for (int64_t i = 0; i < suppressed_count; ++i) row[suppressed[i]] = kMinusInfinity;
  best.clear();
  for (int64_t i = 0; i < vocab; ++i) best.offer(row[i], static_cast<int32_t>(i));
}

}  // namespace

void log_softmax_topk(const Tensor& logits, const ops::TopkOptions& options, Tensor& values, Tensor& ids) {
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  const int k = options.k;
  const float* bias = options.bias ? options.bias->data<float>() : nullptr;
  const int32_t* suppressed = options.suppressed_ids ? options.suppressed_ids->data<int32_t>() : nullptr;
  const int64_t suppressed_count = options.suppressed_ids ? options.suppressed_ids->dim(0) : 0;
  // Rows are independent: dealt to the threads, each with its own scratch.
  parallel_for(rows, std::max<int64_t>(1, 16384 / vocab), [&](int64_t begin, int64_t end) {
    std::vector<float> row(static_cast<size_t>(vocab));
    TopK best(k);
    for (int64_t r = begin; r < end; ++r) {
      select_row(logits.data<float>() + r * vocab, bias, vocab, options.normalize, suppressed, suppressed_count,
                 row.data(), best);
      for (int i = 0; i < k; ++i) {
        ids.data<int32_t>()[r * k + i] = best.id(i);
        values.data<float>()[r * k + i] = best.value(i);
      }
    }
  });
}

}  // namespace seqtrans::cpu
