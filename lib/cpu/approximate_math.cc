#include "cpu/approximate_math.h"

#include <cmath>

#include "cpu/cpu_ops.h"
#include "cpu/simd.h"

namespace seqtrans::cpu {
namespace {

// exp(y) = 2^n exp(r), n = round(y / ln 2), r = y - n ln 2 in two parts (|r| <= ln 2 / 2), exp(r) by its
// Taylor polynomial to r^6 (truncation below 1.2e-7 relative). y is clamped to [kLowest, kHighest], where
// 2^n stays a normal float: swish needs no more (it is x / (1 + exp(-x)), ~0 or ~x out there), nor a softmax
// (weights below e^-87 of the largest count nothing); -inf also clamps, to e^-87 instead of 0.
constexpr float kLowest = -87.0f, kHighest = 88.0f;
constexpr float kLog2e = 1.44269504088896341f;
constexpr float kLn2High = 0.693359375f, kLn2Low = -2.12194440e-4f;
constexpr float kTaylor[7] = {1.0f / 720, 1.0f / 120, 1.0f / 24, 1.0f / 6, 0.5f, 1.0f, 1.0f};  // r^6 down to r^0

#if defined(__x86_64__)
__attribute__((target("avx2,fma"))) inline __m256 exp8(__m256 y) {
  y = _mm256_min_ps(_mm256_max_ps(y, _mm256_set1_ps(kLowest)), _mm256_set1_ps(kHighest));
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(y, _mm256_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2High), y);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(kLn2Low), r);
  __m256 p = _mm256_set1_ps(kTaylor[0]);
  for (int i = 1; i < 7; ++i) p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(kTaylor[i]));
  const __m256i scale = _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  return _mm256_mul_ps(p, _mm256_castsi256_ps(scale));
}

__attribute__((target("avx2,fma"))) void swish_avx2(float* x, int64_t n, const float* bias) {
  const __m256 one = _mm256_set1_ps(1.0f), sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 v = _mm256_add_ps(_mm256_loadu_ps(x + i), _mm256_loadu_ps(bias + i));
    _mm256_storeu_ps(x + i, _mm256_div_ps(v, _mm256_add_ps(one, exp8(_mm256_xor_ps(v, sign)))));
  }
  if (i < n) bias_activation_columns(x, 1, n, i, n, bias, Activation::Swish);
}

__attribute__((target("avx512f"))) inline __m512 exp16(__m512 y) {
  y = _mm512_min_ps(_mm512_max_ps(y, _mm512_set1_ps(kLowest)), _mm512_set1_ps(kHighest));
  const __m512 n = _mm512_roundscale_ps(_mm512_mul_ps(y, _mm512_set1_ps(kLog2e)), _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  __m512 r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2High), y);
  r = _mm512_fnmadd_ps(n, _mm512_set1_ps(kLn2Low), r);
  __m512 p = _mm512_set1_ps(kTaylor[0]);
  for (int i = 1; i < 7; ++i) p = _mm512_fmadd_ps(p, r, _mm512_set1_ps(kTaylor[i]));
  const __m512i scale = _mm512_slli_epi32(_mm512_add_epi32(_mm512_cvtps_epi32(n), _mm512_set1_epi32(127)), 23);
  return _mm512_mul_ps(p, _mm512_castsi512_ps(scale));
}

__attribute__((target("avx512f"))) void swish_avx512(float* x, int64_t n, const float* bias) {
  const __m512 one = _mm512_set1_ps(1.0f);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m512 v = _mm512_add_ps(_mm512_loadu_ps(x + i), _mm512_loadu_ps(bias + i));
    const __m512 negated = _mm512_castsi512_ps(_mm512_xor_si512(_mm512_castps_si512(v), _mm512_set1_epi32(INT32_MIN)));
    _mm512_storeu_ps(x + i, _mm512_div_ps(v, _mm512_add_ps(one, exp16(negated))));
  }
  if (i < n) swish_avx2(x + i, n - i, bias + i);
}

__attribute__((target("avx2,fma"))) void exp_shifted_avx2(float* x, int64_t n, float shift) {
  const __m256 shift8 = _mm256_set1_ps(shift);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) _mm256_storeu_ps(x + i, exp8(_mm256_sub_ps(_mm256_loadu_ps(x + i), shift8)));
  for (; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

__attribute__((target("avx512f"))) void exp_shifted_avx512(float* x, int64_t n, float shift) {
  const __m512 shift16 = _mm512_set1_ps(shift);
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) _mm512_storeu_ps(x + i, exp16(_mm512_sub_ps(_mm512_loadu_ps(x + i), shift16)));
  exp_shifted_avx2(x + i, n - i, shift);
}
#endif

}  // namespace

void exp_shifted_approximate(float* x, int64_t n, float shift, Isa isa) {
#if defined(__x86_64__)
  if (isa == Isa::Avx512) return exp_shifted_avx512(x, n, shift);
  if (isa == Isa::Avx2) return exp_shifted_avx2(x, n, shift);
#endif
  for (int64_t i = 0; i < n; ++i) x[i] = std::exp(x[i] - shift);
}

void bias_activation_approximate(float* x, int64_t rows, int64_t stride, int64_t begin, int64_t end,
                                 const float* bias, Activation activation, Isa isa) {
#if defined(__x86_64__)
  if (activation == Activation::Swish && isa != Isa::Portable) {
    for (int64_t row = 0; row < rows; ++row) {
      float* values = x + row * stride + begin;
      isa == Isa::Avx512 ? swish_avx512(values, end - begin, bias + begin) : swish_avx2(values, end - begin, bias + begin);
    }
    return;
  }
#endif
  bias_activation_columns(x, rows, stride, begin, end, bias, activation);
}

}  // namespace seqtrans::cpu
