// Summaries of repeated timings for `seqtrans bench`: median, percentiles, spread.
#pragma once

#include <vector>

namespace seqtrans::bench {

// The p-th percentile (0 <= p <= 100) by linear interpolation between the two nearest ranks, numpy's
// default: rank = p / 100 * (n - 1) over the sorted values. Throws seqtrans::Error on an empty input.
double percentile(std::vector<double> values, double p);

// The 50th percentile: the middle value, or the mean of the two middle values.
double median(const std::vector<double>& values);

// Timed runs of one configuration, in seconds.
struct TimingSummary {
  int runs = 0;
  double median = 0;
  double min = 0;
  double max = 0;
};
TimingSummary summarize(const std::vector<double>& seconds);

}  // namespace seqtrans::bench
