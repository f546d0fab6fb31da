// Vectorized math helpers of the CPU ops (not ops themselves).
#pragma once

#include <cstdint>

#include "cpu/isa.h"

namespace seqtrans::cpu {

// sum over i of exp(double(x[i] - shift)), x[i] <= shift or -inf, n >= 0; the subtraction in float as a
// row's log-softmax writes it. exp is a degree-13 polynomial in double after range reduction (relative
// error ~1e-16, as libm's), summed in 4 lanes: 4-6x faster than calling libm, and the same bits on every
// machine (AVX-512 or AVX2 where the CPU has it, the same arithmetic in scalar code elsewhere).
double exp_sum(const float* x, int64_t n, float shift);
// The same with the build for `isa` (at most cpu_isa()): every build gives the same bits.
double exp_sum(const float* x, int64_t n, float shift, Isa isa);

}  // namespace seqtrans::cpu
