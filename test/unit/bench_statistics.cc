// Percentiles and timing summaries of `seqtrans bench` (numpy.percentile's default "linear" method).
#include "bench/statistics.h"

#include "catch.h"
#include "core/error.h"

namespace seqtrans::bench {

TEST_CASE("bench percentile: linear interpolation between ranks", "[bench]") {
  const std::vector<double> four = {4, 1, 3, 2};  // unsorted on purpose
  CHECK(percentile(four, 0) == 1);
  CHECK(percentile(four, 100) == 4);
  CHECK(percentile(four, 50) == Approx(2.5));
  CHECK(percentile(four, 90) == Approx(3.7));  // rank 0.9 * 3 = 2.7: 3 + 0.7 * (4 - 3)
  // numpy.percentile([15, 20, 35, 40, 50], 40) == 29.0: rank 1.6, 20 + 0.6 * 15
  CHECK(percentile({15, 20, 35, 40, 50}, 40) == Approx(29.0));
  std::vector<double> hundred;
  for (int i = 1; i <= 100; ++i) hundred.push_back(i);
  CHECK(percentile(hundred, 99) == Approx(99.01));
  CHECK(percentile(hundred, 50) == Approx(50.5));
  CHECK(percentile({7}, 99) == 7);
}

TEST_CASE("bench percentile: bad input is an error", "[bench]") {
  CHECK_THROWS_AS(percentile({}, 50), Error);
  CHECK_THROWS_AS(percentile({1, 2}, 101), Error);
  CHECK_THROWS_AS(percentile({1, 2}, -1), Error);
}

TEST_CASE("bench median and summary", "[bench]") {
  CHECK(median({3, 1, 2}) == 2);
  CHECK(median({4, 1, 3, 2}) == Approx(2.5));
  const TimingSummary summary = summarize({0.3, 0.1, 0.2, 0.5, 0.4});
  CHECK(summary.runs == 5);
  CHECK(summary.median == Approx(0.3));
  CHECK(summary.min == Approx(0.1));
  CHECK(summary.max == Approx(0.5));
}

}  // namespace seqtrans::bench
