#include "cpu/isa.h"

#include <cstdlib>
#include <cstring>

#if defined(__x86_64__)
#include <cpuid.h>
#endif

namespace seqtrans::cpu {
namespace {

struct Features {
  bool avx2 = false, avx512 = false, avx512_vnni = false;
};

#if defined(__x86_64__)
// CPUID's bits directly (clang 14's __builtin_cpu_supports lacks some of these names).
Features read_features() {
  Features f;
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  if (__get_cpuid(1, &eax, &ebx, &ecx, &edx) == 0) return f;
  constexpr unsigned kFma = 1u << 12, kOsxsave = 1u << 27, kAvx = 1u << 28;
  if ((ecx & (kFma | kOsxsave | kAvx)) != (kFma | kOsxsave | kAvx)) return f;
  unsigned xcr0 = 0, xcr0_high = 0;
  __asm__("xgetbv" : "=a"(xcr0), "=d"(xcr0_high) : "c"(0));
  if ((xcr0 & 0x6u) != 0x6u) return f;  // SSE and AVX state
  if (__get_cpuid_count(7, 0, &eax, &ebx, &ecx, &edx) == 0) return f;
  f.avx2 = (ebx & (1u << 5)) != 0;
  constexpr unsigned kF = 1u << 16, kDq = 1u << 17, kBw = 1u << 30, kVl = 1u << 31;
  const bool zmm_state = (xcr0 & 0xE0u) == 0xE0u;  // opmask, upper halves of zmm0-15, zmm16-31
  f.avx512 = f.avx2 && zmm_state && (ebx & (kF | kDq | kBw | kVl)) == (kF | kDq | kBw | kVl);
  f.avx512_vnni = f.avx512 && (ecx & (1u << 11)) != 0;
  return f;
}
#else
Features read_features() { return {}; }
#endif

// The features, narrowed by SEQTRANS_CPU_ISA.
Features allowed_features() {
  Features f = read_features();
  const char* narrow = std::getenv("SEQTRANS_CPU_ISA");
  if (narrow != nullptr && std::strcmp(narrow, "avx2") == 0) f.avx512 = f.avx512_vnni = false;
  if (narrow != nullptr && std::strcmp(narrow, "portable") == 0) f = Features{};
  return f;
}

const Features& features() {
  static const Features f = allowed_features();
  return f;
}

}  // namespace

Isa cpu_isa() {
  if (features().avx512) return Isa::Avx512;
  return features().avx2 ? Isa::Avx2 : Isa::Portable;
}

bool cpu_has_avx512_vnni() { return features().avx512_vnni; }

const char* isa_name(Isa isa) {
  switch (isa) {
    case Isa::Portable: return "portable";
    case Isa::Avx2: return "avx2";
    case Isa::Avx512: return "avx512";
  }
  return "?";
}

}  // namespace seqtrans::cpu
