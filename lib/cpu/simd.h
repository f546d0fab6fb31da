// The x86 intrinsics, for the CPU kernels' vector builds (cpu/isa.h says which one runs).
#pragma once

#if defined(__x86_64__)
// GCC 12's AVX-512 headers start masked operations from _mm512_undefined_*(), which -W(maybe-)uninitialized
// then reports at every inlined use: a false alarm, silenced for the headers' own lines only.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>
#pragma GCC diagnostic pop
#endif
