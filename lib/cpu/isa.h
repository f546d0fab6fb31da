// Which vector instructions the CPU kernels may use. Read once from CPUID and the state the operating system
// saves (XCR0); SEQTRANS_CPU_ISA=portable|avx2 narrows it, so that the narrower builds can be measured and
// tested on a wider CPU. A kernel with several builds gives the same bits in each unless its header says
// otherwise.
#pragma once

namespace seqtrans::cpu {

enum class Isa {
  Portable,  // plain C++ (the compiler's baseline)
  Avx2,      // AVX2 and FMA
  Avx512,    // AVX-512 F, DQ, BW and VL
};

Isa cpu_isa();
// AVX-512 VNNI (vpdpbusd) beside Isa::Avx512.
bool cpu_has_avx512_vnni();
const char* isa_name(Isa isa);

}  // namespace seqtrans::cpu
