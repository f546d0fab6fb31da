#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/cpu_ops.h"
#include "cpu/thread_pool.h"

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
      const float* in = logits.data<float>() + r * vocab;
      float max_value = kMinusInfinity;
      for (int64_t i = 0; i < vocab; ++i) {
        row[i] = bias ? in[i] + bias[i] : in[i];
        if (std::isnan(row[i])) row[i] = kMinusInfinity;  // NaN never wins
        max_value = std::max(max_value, row[i]);
      }
      // Normalizer with the exp-sum in double; an all -inf row stays -inf.
      if (options.normalize && max_value != kMinusInfinity) {
        double exp_sum = 0.0;
        for (int64_t i = 0; i < vocab; ++i) exp_sum += std::exp(static_cast<double>(row[i] - max_value));
        const float log_sum = static_cast<float>(std::log(exp_sum));
        for (int64_t i = 0; i < vocab; ++i) row[i] = (row[i] - max_value) - log_sum;
      }
      for (int64_t i = 0; i < suppressed_count; ++i) row[suppressed[i]] = kMinusInfinity;
      best.clear();
      for (int64_t i = 0; i < vocab; ++i) best.offer(row[i], static_cast<int32_t>(i));
      for (int i = 0; i < k; ++i) {
        ids.data<int32_t>()[r * k + i] = best.id(i);
        values.data<float>()[r * k + i] = best.value(i);
      }
    }
  });
}

}  // namespace seqtrans::cpu
