// Hugging Face's sampling warpers as a plain reference in double, and a chi-square test of draws against
// a distribution: the oracle of the sampling tests (ops and search).
#pragma once

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <numeric>
#include <vector>

#include "catch.h"

namespace seqtrans::testing {

// The warpers' settings, as HF's generate() takes them.
struct Warpers {
  int top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  float temperature = 1.0f;
};

// Hugging Face's warpers in double: temperature, top-k (ties with the k-th stay), top-p (ascending sort,
// lower ids last among ties, cumulative <= 1 - p goes, the best stays), min-p; the softmax of what is left.
inline std::vector<double> warped_distribution(const std::vector<float>& logits, const Warpers& row) {
  const size_t vocab = logits.size();
  std::vector<double> x(vocab);
  for (size_t i = 0; i < vocab; ++i) x[i] = static_cast<double>(logits[i]) / row.temperature;
  const auto softmax = [&] {
    const double max = *std::max_element(x.begin(), x.end());
    std::vector<double> p(vocab);
    double sum = 0.0;
    for (size_t i = 0; i < vocab; ++i) sum += p[i] = std::exp(x[i] - max);
    for (double& value : p) value /= sum;
    return p;
  };
  if (row.top_k > 0 && static_cast<size_t>(row.top_k) < vocab) {
    std::vector<double> sorted = x;
    std::sort(sorted.rbegin(), sorted.rend());
    const double kth = sorted[row.top_k - 1];
    for (double& value : x)
      if (value < kth) value = -std::numeric_limits<double>::infinity();
  }
  if (row.top_p < 1.0f) {
    const std::vector<double> p = softmax();
    std::vector<size_t> order(vocab);
    std::iota(order.begin(), order.end(), size_t{0});
    std::sort(order.begin(), order.end(), [&](size_t a, size_t b) { return p[a] < p[b] || (p[a] == p[b] && a > b); });
    double cumulative = 0.0;
    for (size_t rank = 0; rank + 1 < vocab; ++rank) {
      cumulative += p[order[rank]];
      if (cumulative <= 1.0 - row.top_p) x[order[rank]] = -std::numeric_limits<double>::infinity();
    }
  }
  if (row.min_p > 0.0f) {
    const std::vector<double> p = softmax();
    const double top = *std::max_element(p.begin(), p.end());
    for (size_t i = 0; i < vocab; ++i)
      if (p[i] < row.min_p * top) x[i] = -std::numeric_limits<double>::infinity();
  }
  return softmax();
}

// Pearson's chi-square of the draws against `expected`, cells with fewer than 5 expected draws pooled;
// checks it against the 0.001 quantile (Wilson-Hilferty) and that no draw falls where expected is 0.
inline void check_chi_square(const std::vector<int32_t>& ids, const std::vector<double>& expected) {
  std::vector<double> observed(expected.size(), 0.0);
  for (int32_t id : ids) observed[static_cast<size_t>(id)] += 1.0;
  const double draws = static_cast<double>(ids.size());
  double chi_square = 0.0, pooled_observed = 0.0, pooled_expected = 0.0;
  int cells = 0;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (expected[i] == 0.0) {
      INFO("id " << i << " has probability 0");
      CHECK(observed[i] == 0.0);
      continue;
    }
    const double want = expected[i] * draws;
    if (want < 5.0) {
      pooled_observed += observed[i];
      pooled_expected += want;
      continue;
    }
    chi_square += (observed[i] - want) * (observed[i] - want) / want;
    ++cells;
  }
  if (pooled_expected > 0.0) {
    chi_square += (pooled_observed - pooled_expected) * (pooled_observed - pooled_expected) / pooled_expected;
    ++cells;
  }
  const double dof = std::max(1, cells - 1);
  const double z = 3.09;  // the 0.999 quantile of the standard normal
  const double critical = dof * std::pow(1.0 - 2.0 / (9.0 * dof) + z * std::sqrt(2.0 / (9.0 * dof)), 3.0);
  INFO("chi-square " << chi_square << " with " << dof << " degrees of freedom, critical " << critical);
  CHECK(chi_square < critical);
}

}  // namespace seqtrans::testing
