// Math for the int8 precision, whose results are approximations anyway: exp evaluated 8 or 16 values at a time
// (a degree-6 polynomial after range reduction, relative error under 3e-7) instead of a libm call per value,
// for swish in the int8 products' epilogue (packed_gemm_i8; the libm calls took as long as the int8 product
// itself at the feed-forward's inner layer) and for the attention softmax (ops::AttentionOptions::
// approximate_exp). Not for the fp32 path: libm's exp there keeps the CPU's bits as they are (glibc's expf is
// not correctly rounded on 97,052 of the 1.1e9 floats in [-104, 0], so no vectorized exp can match it).
#pragma once

#include <cstdint>

#include "cpu/isa.h"
#include "ops/op_types.h"

namespace seqtrans::cpu {

// bias_activation_columns' contract (x[r, begin:end] = activation(x + bias)), swish approximated; other
// activations are computed exactly.
void bias_activation_approximate(float* x, int64_t rows, int64_t stride, int64_t begin, int64_t end,
                                 const float* bias, Activation activation, Isa isa);

// x[i] = exp(x[i] - shift) in place, for x[i] - shift <= 0 or -inf (a softmax's row after its maximum).
void exp_shifted_approximate(float* x, int64_t n, float shift, Isa isa);

}  // namespace seqtrans::cpu
