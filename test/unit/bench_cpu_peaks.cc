// The CPU floor's peak rates: measured, plausible, and measured once.
#include "bench/cpu_peaks.h"
#include "catch.h"

using namespace seqtrans;

TEST_CASE("cpu_peaks measures a FLOP rate and a bandwidth in a plausible range, once per process", "[bench]") {
  const bench::Hardware first = bench::cpu_peaks();
  CHECK(first.known());
  // Any CPU this runs on does more than 0.1 GFLOP/s and 0.1 GB/s, and no CPU core reaches 100 TFLOP/s.
  CHECK(first.flops_per_second > 1e8);
  CHECK(first.flops_per_second < 1e14);
  CHECK(first.bytes_per_second > 1e8);
  const bench::Hardware again = bench::cpu_peaks();
  CHECK(again.flops_per_second == first.flops_per_second);
  CHECK(again.bytes_per_second == first.bytes_per_second);
}
