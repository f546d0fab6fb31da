#include "bench/statistics.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"

namespace seqtrans::bench {

double percentile(std::vector<double> values, double p) {
  SEQTRANS_CHECK(!values.empty(), "percentile of no values");
  SEQTRANS_CHECK(p >= 0.0 && p <= 100.0, "percentile {} is outside [0, 100]", p);
  std::sort(values.begin(), values.end());
  const double rank = p / 100.0 * static_cast<double>(values.size() - 1);
  const size_t below = static_cast<size_t>(std::floor(rank));
  const size_t above = std::min(below + 1, values.size() - 1);
  const double fraction = rank - static_cast<double>(below);
  return values[below] + fraction * (values[above] - values[below]);
}

double median(const std::vector<double>& values) { return percentile(values, 50.0); }

TimingSummary summarize(const std::vector<double>& seconds) {
  TimingSummary summary;
  summary.runs = static_cast<int>(seconds.size());
  summary.median = median(seconds);
  summary.min = *std::min_element(seconds.begin(), seconds.end());
  summary.max = *std::max_element(seconds.begin(), seconds.end());
  return summary;
}

}  // namespace seqtrans::bench
