// The arithmetic of a sampling draw, written once for the CPU op and the CUDA kernel (host and device),
// so that both choose the same token from the same logits, bit for bit:
//  - every rounding step is an IEEE operation that rounds the same on both sides: separate multiplies and
//    adds (never contracted into an FMA: __fmul_rn/__fadd_rn on the device, -ffp-contract=off on the
//    host), an exp of our own instead of the libraries' (whose last bits differ);
//  - probabilities are fixed-point integers, so that sums do not depend on the order of summation (a
//    block reduction and a serial loop give the same total).
// A token's weight is exp(x - max) in units of 2^-kWeightBits: the most likely token weighs exactly
// 2^kWeightBits, and tokens below e^-29 of it weigh 0 (they are never drawn).
#pragma once

#include <cstdint>
#include <cstring>

#include "core/philox.h"

namespace seqtrans {

constexpr int kWeightBits = 42;
// Sums of weights fit in 64 bits for vocabularies up to 2^21 tokens.
constexpr int64_t kMaxSamplingVocab = int64_t{1} << 21;

namespace sampling_detail {

SEQTRANS_HOST_DEVICE inline float add_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fadd_rn(a, b);
#else
  return a + b;
#endif
}

SEQTRANS_HOST_DEVICE inline float mul_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fmul_rn(a, b);
#else
  return a * b;
#endif
}

SEQTRANS_HOST_DEVICE inline float round_to_integer(float x) {
#if defined(__CUDA_ARCH__)
  return rintf(x);
#else
  return __builtin_rintf(x);
#endif
}

SEQTRANS_HOST_DEVICE inline float bits_to_float(uint32_t bits) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(bits);
#else
  float x;
  std::memcpy(&x, &bits, sizeof(x));
  return x;
#endif
}

SEQTRANS_HOST_DEVICE inline uint32_t float_to_bits(float x) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(x);
#else
  uint32_t bits;
  std::memcpy(&bits, &x, sizeof(bits));
  return bits;
#endif
}

// floor(a * b / 2^64): the draw's position in [0, b).
SEQTRANS_HOST_DEVICE inline uint64_t high_product(uint64_t a, uint64_t b) {
#if defined(__CUDA_ARCH__)
  return __umul64hi(a, b);
#else
  return static_cast<uint64_t>((static_cast<unsigned __int128>(a) * b) >> 64);
#endif
}

}  // namespace sampling_detail

// x / temperature, x + bias: the two roundings the op applies to a logit before anything else.
SEQTRANS_HOST_DEVICE inline float divide_rn(float a, float b) {
#if defined(__CUDA_ARCH__)
  return __fdiv_rn(a, b);
#else
  return a / b;
#endif
}
using sampling_detail::add_rn;

// Order-preserving map of a float to uint32 (a larger float has a larger key), -0 folded into +0 so the
// two compare equal as floats do. -inf maps to 0x007fffff; no real value maps below it.
SEQTRANS_HOST_DEVICE inline uint32_t order_key(float x) {
  const uint32_t bits = sampling_detail::float_to_bits(x + 0.0f);  // -0 + 0 = +0
  const uint32_t sign = static_cast<uint32_t>(static_cast<int32_t>(bits) >> 31);  // all ones if negative
  return bits ^ (sign | 0x80000000u);
}

// The score of a key: order_key's inverse (-0 comes back as +0).
SEQTRANS_HOST_DEVICE inline float key_score(uint32_t key) {
  return sampling_detail::bits_to_float((key & 0x80000000u) ? (key & 0x7fffffffu) : ~key);
}

// exp(d) for d <= 0 in units of 2^-kWeightBits, truncated: exactly 2^kWeightBits at d = 0, 0 below -29.2.
// d = n ln2 + r with |r| <= ln2 / 2 (ln2 split in a 12-bit head, so n * head is exact, and a tail), then
// e^r by its Taylor polynomial of degree 7 (truncation error below 1e-8 relative), then the scale 2^n.
SEQTRANS_HOST_DEVICE inline uint64_t sampling_weight(float d) {
  using sampling_detail::add_rn;
  using sampling_detail::mul_rn;
  if (!(d > -30.0f)) return 0;  // -inf and NaN weigh nothing
  if (d > 0.0f) d = 0.0f;
  // Constants as hexadecimal literals: the same float whichever compiler parses them.
  const float n = sampling_detail::round_to_integer(mul_rn(d, 0x1.715476p+0f));  // d / ln2, in [-44, 0]
  float r = add_rn(d, mul_rn(n, -0x1.62e000p-1f));  // ln2's 12-bit head (0.693115234375): n * head is exact
  r = add_rn(r, mul_rn(n, -0x1.0bfbe8p-15f));       // ln2's tail
  float p = 0x1.a01a02p-13f;                        // 1/7!, 1/6!, ... 1/2!, 1, 1
  p = add_rn(mul_rn(p, r), 0x1.6c16c2p-10f);
  p = add_rn(mul_rn(p, r), 0x1.111112p-7f);
  p = add_rn(mul_rn(p, r), 0x1.555556p-5f);
  p = add_rn(mul_rn(p, r), 0x1.555556p-3f);
  p = add_rn(mul_rn(p, r), 0.5f);
  p = add_rn(mul_rn(p, r), 1.0f);
  p = add_rn(mul_rn(p, r), 1.0f);
  // p * 2^(kWeightBits + n): a power-of-two scale is exact; the float's 24 bits are truncated to an integer.
  const int exponent = kWeightBits + static_cast<int>(n);
  const float scaled = mul_rn(p, sampling_detail::bits_to_float(static_cast<uint32_t>(127 + exponent) << 23));
#if defined(__CUDA_ARCH__)
  return __float2ull_rz(scaled);
#else
  return static_cast<uint64_t>(scaled);
#endif
}

// Top-p (Hugging Face's TopPLogitsWarper): sorted ascending, the tokens whose cumulative probability is
// <= 1 - p go. In weights: of a total S, the least likely tokens go while their sum stays <= (1 - p) S,
// so the kept tokens are those with less than S - floor((1 - p) S) of weight ranked before them.
SEQTRANS_HOST_DEVICE inline uint64_t top_p_kept_mass(uint64_t total, float top_p) {
  const double removable = static_cast<double>(total) * (1.0 - static_cast<double>(top_p));
  const uint64_t removed = removable <= 0.0 ? 0 : static_cast<uint64_t>(removable);
  return removed >= total ? 1 : total - removed;
}

// Min-p (Hugging Face's MinPLogitsWarper): a token stays when its probability is at least min_p times the
// largest. The largest weighs 2^kWeightBits, so the bound is ceil(min_p * 2^kWeightBits) (exact in double).
SEQTRANS_HOST_DEVICE inline uint64_t min_p_weight(float min_p) {
  const double bound = static_cast<double>(min_p) * static_cast<double>(uint64_t{1} << kWeightBits);
  const uint64_t floor_bound = static_cast<uint64_t>(bound);
  return static_cast<double>(floor_bound) == bound ? floor_bound : floor_bound + 1;
}

// The draw's position among `total` units of kept weight: uniform in [0, total) for uniform bits.
SEQTRANS_HOST_DEVICE inline uint64_t draw_position(uint64_t bits, uint64_t total) {
  return sampling_detail::high_product(bits, total);
}

}  // namespace seqtrans
