// Activations for the int8 products' epilogue (packed_gemm_i8), whose results are approximations anyway:
// swish with its exp evaluated 8 or 16 values at a time (a degree-6 polynomial after range reduction,
// relative error under 1e-6 against the exact formula) instead of a libm call per value, which took as long as
// the int8 product itself at the feed-forward's inner layer. Other activations are computed exactly
// (bias_activation_columns). Not for the fp32 path: libm's exp there keeps the CPU's bits as they are.
#pragma once

#include <cstdint>

#include "cpu/isa.h"
#include "ops/ops.h"

namespace seqtrans::cpu {

// bias_activation_columns' contract (x[r, begin:end] = activation(x + bias)), swish approximated.
void bias_activation_approximate(float* x, int64_t rows, int64_t stride, int64_t begin, int64_t end,
                                 const float* bias, Activation activation, Isa isa);

}  // namespace seqtrans::cpu
