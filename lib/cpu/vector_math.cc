#include "cpu/vector_math.h"

#include <cstring>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

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
__attribute__((target("avx2"))) double exp_sum_avx2(const float* x, int64_t n, float shift) {
  const __m256d log2e = _mm256_set1_pd(kLog2e), shifter = _mm256_set1_pd(kShifter);
  const __m256d ln2_high = _mm256_set1_pd(kLn2High), ln2_low = _mm256_set1_pd(kLn2Low);
  const __m256d lowest = _mm256_set1_pd(kLowest);
  const __m128 shift4 = _mm_set1_ps(shift);
  const __m256i shifter_bits = _mm256_castpd_si256(shifter), bias = _mm256_set1_epi64x(1023);
  __m256d total = _mm256_setzero_pd();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    const __m256d v = _mm256_cvtps_pd(_mm_sub_ps(_mm_loadu_ps(x + i), shift4));
    const __m256d shifted = _mm256_add_pd(_mm256_mul_pd(v, log2e), shifter);
    const __m256d k = _mm256_sub_pd(shifted, shifter);
    const __m256d r = _mm256_sub_pd(_mm256_sub_pd(v, _mm256_mul_pd(k, ln2_high)), _mm256_mul_pd(k, ln2_low));
    __m256d p = _mm256_set1_pd(kTaylor[0]);
    for (int t = 1; t < 14; ++t) p = _mm256_add_pd(_mm256_mul_pd(p, r), _mm256_set1_pd(kTaylor[t]));
    const __m256i exponent =
        _mm256_slli_epi64(_mm256_add_epi64(_mm256_sub_epi64(_mm256_castpd_si256(shifted), shifter_bits), bias), 52);
    const __m256d value = _mm256_mul_pd(p, _mm256_castsi256_pd(exponent));
    const __m256d kept = _mm256_cmp_pd(v, lowest, _CMP_GE_OQ);  // false below kLowest and for -inf
    total = _mm256_add_pd(total, _mm256_and_pd(value, kept));
  }
  alignas(32) double lanes[kLanes];
  _mm256_store_pd(lanes, total);
  for (; i < n; ++i) lanes[i % kLanes] += exp_nonpositive(static_cast<double>(x[i] - shift));
  return lane_total(lanes);
}
#endif

}  // namespace

double exp_sum(const float* x, int64_t n, float shift) {
#if defined(__x86_64__)
  static const bool avx2 = __builtin_cpu_supports("avx2");
  if (avx2) return exp_sum_avx2(x, n, shift);
#endif
  return exp_sum_scalar(x, n, shift);
}

}  // namespace seqtrans::cpu
