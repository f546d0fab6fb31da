// The CPU's peak rates for the floor (docs/BENCHMARKS.md, "The floor"), measured on the machine itself:
// on the CPU there is no one model to quote figures for.
#pragma once

#include "bench/cost_model.h"

namespace seqtrans::bench {

// Measured once per process, with the CPU backend's threads as set now (ops::set_cpu_threads): the best
// of a few fp32 matrix products through ops::matmul at a shape where BLAS runs at full speed (FLOP/s),
// and of a few copies of a buffer well past the caches, split over the same threads (bytes read + written
// per second). About 0.3 s the first time.
Hardware cpu_peaks();

}  // namespace seqtrans::bench
