#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <vector>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void log_softmax_topk(const Tensor& logits, const ops::TopkOptions& options, Tensor& values, Tensor& ids) {
  constexpr float kMinusInfinity = -std::numeric_limits<float>::infinity();
  const int64_t rows = logits.dim(0), vocab = logits.dim(1);
  const int k = options.k;
  const float* bias = options.bias ? options.bias->data<float>() : nullptr;
  std::vector<float> row(static_cast<size_t>(vocab));
  std::vector<int32_t> order(static_cast<size_t>(vocab));
  for (int64_t r = 0; r < rows; ++r) {
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
    if (options.suppressed_ids) {
      const int32_t* suppressed = options.suppressed_ids->data<int32_t>();
      for (int64_t i = 0; i < options.suppressed_ids->dim(0); ++i) row[suppressed[i]] = kMinusInfinity;
    }
    std::iota(order.begin(), order.end(), 0);
    std::partial_sort(order.begin(), order.begin() + k, order.end(),
                      [&](int32_t a, int32_t b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
    for (int i = 0; i < k; ++i) {
      ids.data<int32_t>()[r * k + i] = order[i];
      values.data<float>()[r * k + i] = row[order[i]];
    }
  }
}

}  // namespace seqtrans::cpu
