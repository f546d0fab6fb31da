#include "core/dtype.h"

#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#include <immintrin.h>
#endif

namespace seqtrans {
namespace {

#if defined(__x86_64__)
// F16C and AVX (CPUID leaf 1, ECX bits 29 and 28) with the OS saving AVX state (OSXSAVE, ECX bit 27, and
// XCR0's SSE and AVX bits): read directly, since clang 14's __builtin_cpu_supports knows no "f16c".
bool cpu_has_f16c() {
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return false;
  constexpr unsigned kF16c = 1u << 29, kAvx = 1u << 28, kOsxsave = 1u << 27;
  if ((ecx & (kF16c | kAvx | kOsxsave)) != (kF16c | kAvx | kOsxsave)) return false;
  unsigned xcr0 = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  return (xcr0 & 6u) == 6u;
}

__attribute__((target("avx,f16c"))) void halves_to_floats_f16c(const uint16_t* in, float* out, int64_t count) {
  int64_t i = 0;
  for (; i + 8 <= count; i += 8)
    _mm256_storeu_ps(out + i, _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(in + i))));
  for (; i < count; ++i) out[i] = half_to_float(in[i]);
}
#endif

}  // namespace

void halves_to_floats(const uint16_t* in, float* out, int64_t count) {
#if defined(__x86_64__)
  static const bool f16c = cpu_has_f16c();
  if (f16c) return halves_to_floats_f16c(in, out, count);
#endif
  for (int64_t i = 0; i < count; ++i) out[i] = half_to_float(in[i]);
}

float half_to_float(uint16_t h) {
  const uint32_t sign = (h & 0x8000u) << 16;
  const uint32_t exponent = (h >> 10) & 0x1fu;
  uint32_t mantissa = h & 0x3ffu;
  uint32_t bits;
  if (exponent == 0) {
    if (mantissa == 0) {
      bits = sign;
    } else {  // subnormal: renormalize
      int shift = 0;
      while ((mantissa & 0x400u) == 0) {
        mantissa <<= 1;
        ++shift;
      }
      mantissa &= 0x3ffu;
      bits = sign | (static_cast<uint32_t>(127 - 15 - shift + 1) << 23) | (mantissa << 13);
    }
  } else if (exponent == 0x1f) {
    bits = sign | 0x7f800000u | (mantissa << 13);
  } else {
    bits = sign | ((exponent + 127 - 15) << 23) | (mantissa << 13);
  }
  float out;
  std::memcpy(&out, &bits, sizeof(out));
  return out;
}

uint16_t float_to_half(float f) {
  uint32_t bits;
  std::memcpy(&bits, &f, sizeof(bits));
  const uint32_t sign = (bits >> 16) & 0x8000u;
  const uint32_t abs = bits & 0x7fffffffu;
  if (abs >= 0x7f800000u) {  // inf or nan
    return static_cast<uint16_t>(sign | 0x7c00u | (abs > 0x7f800000u ? 0x200u : 0u));
  }
  if (abs >= 0x477ff000u) return static_cast<uint16_t>(sign | 0x7c00u);  // overflow to inf
  if (abs < 0x38800000u) {  // subnormal or zero in half
    if (abs < 0x33000000u) return static_cast<uint16_t>(sign);
    // value in units of the smallest half subnormal (2^-24) is mantissa * 2^(exponent - 126)
    const uint32_t exponent = abs >> 23;
    const uint32_t mantissa = (abs & 0x7fffffu) | 0x800000u;
    const uint32_t shift = 126 - exponent;
    const uint32_t remainder = mantissa & ((1u << shift) - 1u);
    const uint32_t halfway = 1u << (shift - 1);
    uint32_t result = mantissa >> shift;
    if (remainder > halfway || (remainder == halfway && (result & 1u))) ++result;
    return static_cast<uint16_t>(sign | result);
  }
  uint32_t result = ((abs - 0x38000000u) >> 13);
  const uint32_t remainder = abs & 0x1fffu;
  if (remainder > 0x1000u || (remainder == 0x1000u && (result & 1u))) ++result;
  return static_cast<uint16_t>(sign | result);
}

}  // namespace seqtrans
