#include "cpu/vector_math.h"

#include "cpu/isa.h"
#include "cpu/simd.h"

#include <cstring>


namespace seqtrans::cpu {
namespace {

constexpr double kLog2e = 1.4426950408889634074;
constexpr double kLn2High = 6.93147180369123816490e-01;  // ln 2 in two parts: n * high is exact
constexpr double kLn2Low = 1.90821492927058770002e-10;
constexpr double kShifter = 6755399441055744.0;  // 1.5 * 2^52: adding it rounds to an integer
// Below this exp(x) < 3e-308: nothing next to the row's maximum term, exp(0) = 1.
constexpr double kLowest = -708.0;
// 1/k! for k = 13 down to 0 (Horner's order).
constexpr double kTaylor[14] = {1.0 / 6227020800.0, 1.0 / 479001600.0, 1.0 / 39916800.0, 1.0 / 3628800.0,
                                1.0 / 362880.0,     1.0 / 40320.0,     1.0 / 5040.0,     1.0 / 720.0,
                                1.0 / 120.0,        1.0 / 24.0,        1.0 / 6.0,        0.5,
                                1.0,                1.0};
constexpr int kLanes = 4;

// exp(x) for x <= 0, the scalar twin of the AVX2 lanes below (same operations, same order).
double exp_nonpositive(double x) {
  if (!(x >= kLowest)) return 0.0;  // also -inf
  const double shifted = x * kLog2e + kShifter;
  const double n = shifted - kShifter;
  const double r = (x - n * kLn2High) - n * kLn2Low;
  double p = kTaylor[0];
  for (int i = 1; i < 14; ++i) p = p * r + kTaylor[i];
  int64_t shifted_bits, shifter_bits;
  std::memcpy(&shifted_bits, &shifted, sizeof(double));
  std::memcpy(&shifter_bits, &kShifter, sizeof(double));
  const int64_t scale_bits = (shifted_bits - shifter_bits + 1023) << 52;
  double scale;
  std::memcpy(&scale, &scale_bits, sizeof(double));
  return p * scale;
}

double lane_total(const double* lanes) { return (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]); }

double exp_sum_scalar(const float* x, int64_t n, float shift) {
  double lanes[kLanes] = {};
  for (int64_t i = 0; i < n; ++i) lanes[i % kLanes] += exp_nonpositive(static_cast<double>(x[i] - shift));
  return lane_total(lanes);
}

#if defined(__x86_64__)
// The AVX2 and AVX-512 builds evaluate exp_nonpositive's operations on 4 or 8 values at once. Each block of
// values runs as kChains independent chains, their steps interleaved: one chain is 13 dependent
// multiply-adds (about 80 cycles), and the processor's window does not reach far enough ahead to overlap
// blocks by itself (1.3x for AVX2 on an AMD EPYC). The exps then join the totals in index order.
constexpr int kChains = 2;

__attribute__((target("avx2"))) double exp_sum_avx2(const float* x, int64_t n, float shift) {
  const __m256d log2e = _mm256_set1_pd(kLog2e), shifter = _mm256_set1_pd(kShifter);
  const __m256d ln2_high = _mm256_set1_pd(kLn2High), ln2_low = _mm256_set1_pd(kLn2Low);
  const __m256d lowest = _mm256_set1_pd(kLowest);
  const __m128 shift4 = _mm_set1_ps(shift);
  const __m256i shifter_bits = _mm256_castpd_si256(shifter), bias = _mm256_set1_epi64x(1023);
  __m256d total = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + kChains * kLanes <= n; i += kChains * kLanes) {
    __m256d v[kChains], shifted[kChains], r[kChains], p[kChains];
    for (int c = 0; c < kChains; ++c) {
      v[c] = _mm256_cvtps_pd(_mm_sub_ps(_mm_loadu_ps(x + i + c * kLanes), shift4));
      shifted[c] = _mm256_add_pd(_mm256_mul_pd(v[c], log2e), shifter);
      const __m256d k = _mm256_sub_pd(shifted[c], shifter);
      r[c] = _mm256_sub_pd(_mm256_sub_pd(v[c], _mm256_mul_pd(k, ln2_high)), _mm256_mul_pd(k, ln2_low));
      p[c] = _mm256_set1_pd(kTaylor[0]);
    }
    for (int t = 1; t < 14; ++t)
      for (int c = 0; c < kChains; ++c) p[c] = _mm256_add_pd(_mm256_mul_pd(p[c], r[c]), _mm256_set1_pd(kTaylor[t]));
    for (int c = 0; c < kChains; ++c) {
      const __m256i exponent = _mm256_slli_epi64(
          _mm256_add_epi64(_mm256_sub_epi64(_mm256_castpd_si256(shifted[c]), shifter_bits), bias), 52);
      const __m256d value = _mm256_mul_pd(p[c], _mm256_castsi256_pd(exponent));
      const __m256d kept = _mm256_cmp_pd(v[c], lowest, _CMP_GE_OQ);  // false below kLowest and for -inf
      total = _mm256_add_pd(total, _mm256_and_pd(value, kept));
    }
  }
  alignas(32) double lanes[kLanes];
  _mm256_store_pd(lanes, total);
  for (; i < n; ++i) lanes[i % kLanes] += exp_nonpositive(static_cast<double>(x[i] - shift));
  return lane_total(lanes);
}

__attribute__((target("avx512f,avx512dq"))) double exp_sum_avx512(const float* x, int64_t n, float shift) {
  constexpr int kWide = 2 * kLanes;  // values per register
  const __m512d log2e = _mm512_set1_pd(kLog2e), shifter = _mm512_set1_pd(kShifter);
  const __m512d ln2_high = _mm512_set1_pd(kLn2High), ln2_low = _mm512_set1_pd(kLn2Low);
  const __m512d lowest = _mm512_set1_pd(kLowest);
  const __m256 shift8 = _mm256_set1_ps(shift);
  const __m512i shifter_bits = _mm512_castpd_si512(shifter), bias = _mm512_set1_epi64(1023);
  __m256d total = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + kChains * kWide <= n; i += kChains * kWide) {
    __m512d v[kChains], shifted[kChains], r[kChains], p[kChains];
    for (int c = 0; c < kChains; ++c) {
      v[c] = _mm512_cvtps_pd(_mm256_sub_ps(_mm256_loadu_ps(x + i + c * kWide), shift8));
      shifted[c] = _mm512_add_pd(_mm512_mul_pd(v[c], log2e), shifter);
      const __m512d k = _mm512_sub_pd(shifted[c], shifter);
      r[c] = _mm512_sub_pd(_mm512_sub_pd(v[c], _mm512_mul_pd(k, ln2_high)), _mm512_mul_pd(k, ln2_low));
      p[c] = _mm512_set1_pd(kTaylor[0]);
    }
    for (int t = 1; t < 14; ++t)
      for (int c = 0; c < kChains; ++c) p[c] = _mm512_add_pd(_mm512_mul_pd(p[c], r[c]), _mm512_set1_pd(kTaylor[t]));
    for (int c = 0; c < kChains; ++c) {
      const __m512i exponent = _mm512_slli_epi64(
          _mm512_add_epi64(_mm512_sub_epi64(_mm512_castpd_si512(shifted[c]), shifter_bits), bias), 52);
      const __m512d value = _mm512_maskz_mov_pd(_mm512_cmp_pd_mask(v[c], lowest, _CMP_GE_OQ),
                                                _mm512_mul_pd(p[c], _mm512_castsi512_pd(exponent)));
      // Values i..i+3 join the four lanes before values i+4..i+7, as in the 4-wide builds.
      total = _mm256_add_pd(total, _mm512_castpd512_pd256(value));
      total = _mm256_add_pd(total, _mm512_extractf64x4_pd(value, 1));
    }
  }
  alignas(32) double lanes[kLanes];
  _mm256_store_pd(lanes, total);
  for (; i < n; ++i) lanes[i % kLanes] += exp_nonpositive(static_cast<double>(x[i] - shift));
  return lane_total(lanes);
}
#endif

}  // namespace

double exp_sum(const float* x, int64_t n, float shift, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::Avx512) return exp_sum_avx512(x, n, shift);
  if (isa == Isa::Avx2) return exp_sum_avx2(x, n, shift);
#endif
  return exp_sum_scalar(x, n, shift);
}

double exp_sum(const float* x, int64_t n, float shift) { return exp_sum(x, n, shift, cpu_isa()); }

}  // namespace seqtrans::cpu
