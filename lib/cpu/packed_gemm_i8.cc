// packed_gemm_i8 and quantize_rows: register tiles of c over int8 panels, each summed over all of k in int32.
#include <algorithm>
#include <array>
#include <cmath>
#include <cstring>
#include <utility>

#include "core/error.h"
#include "cpu/packed_gemm.h"
#include "cpu/simd.h"

namespace seqtrans::cpu {
namespace {

constexpr int64_t kWidth = PackedMatrix::kPanelWidth;
constexpr int64_t kQuadBytes = kWidth * 4;  // one quad of k for a panel's channels

void quantize_row_portable(const float* x, int64_t k, int64_t quads, bool offset, uint8_t* q, float* scale) {
  float largest = 0.0f;
  for (int64_t kk = 0; kk < k; ++kk) largest = std::max(largest, std::abs(x[kk]));
  *scale = largest / 127.0f;
  const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
  const int shift = offset ? 128 : 0;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float v = std::clamp(std::nearbyint(x[kk] * inverse), -127.0f, 127.0f);
    q[kk] = static_cast<uint8_t>(static_cast<int>(v) + shift);
  }
  for (int64_t kk = k; kk < quads * 4; ++kk) q[kk] = static_cast<uint8_t>(shift);
}

#if defined(__x86_64__)

// The portable row's arithmetic, 8 values at a time (max of |x| is exact in any order; the rounding is the
// same nearest-even conversion).
__attribute__((target("avx2"))) void quantize_row_avx2(const float* x, int64_t k, int64_t quads, bool offset,
                                                        uint8_t* q, float* scale) {
  const __m256 sign_bit = _mm256_set1_ps(-0.0f);
  __m256 largest8 = _mm256_setzero_ps();
  int64_t kk = 0;
  for (; kk + 8 <= k; kk += 8) largest8 = _mm256_max_ps(largest8, _mm256_andnot_ps(sign_bit, _mm256_loadu_ps(x + kk)));
  alignas(32) float lanes[8];
  _mm256_store_ps(lanes, largest8);
  float largest = 0.0f;
  for (float lane : lanes) largest = std::max(largest, lane);
  for (; kk < k; ++kk) largest = std::max(largest, std::abs(x[kk]));
  *scale = largest / 127.0f;
  const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
  const __m256 inverse8 = _mm256_set1_ps(inverse);
  const __m256i low = _mm256_set1_epi32(-127), high = _mm256_set1_epi32(127);
  const __m256i shift = _mm256_set1_epi32(offset ? 128 : 0);
  for (kk = 0; kk + 8 <= k; kk += 8) {
    __m256i v = _mm256_cvtps_epi32(_mm256_mul_ps(_mm256_loadu_ps(x + kk), inverse8));
    v = _mm256_add_epi32(_mm256_min_epi32(_mm256_max_epi32(v, low), high), shift);
    alignas(32) int32_t values[8];
    _mm256_store_si256(reinterpret_cast<__m256i*>(values), v);
    for (int l = 0; l < 8; ++l) q[kk + l] = static_cast<uint8_t>(values[l]);
  }
  const int pad = offset ? 128 : 0;
  for (; kk < k; ++kk) {
    const float v = std::clamp(std::nearbyint(x[kk] * inverse), -127.0f, 127.0f);
    q[kk] = static_cast<uint8_t>(static_cast<int>(v) + pad);
  }
  for (; kk < quads * 4; ++kk) q[kk] = static_cast<uint8_t>(pad);
}

// AVX-512 VNNI: Rows x (Panels x 16) channels in Rows * Panels registers of 16 int32 sums.
template <int Rows, int Panels>
__attribute__((target("avx512f,avx512bw,avx512vnni"))) void tile_vnni(const uint8_t* q, int64_t ldq,
                                                                       const float* row_scales, const int8_t* panel,
                                                                       int64_t quads, const float* channel_scales,
                                                                       const int32_t* channel_sums, float* c,
                                                                       int64_t ldc, int valid_last) {
  __m512i sums[Rows][Panels];
  for (int r = 0; r < Rows; ++r)
    for (int p = 0; p < Panels; ++p) sums[r][p] = _mm512_setzero_si512();
  const int64_t panel_stride = quads * kQuadBytes;
  for (int64_t quad = 0; quad < quads; ++quad) {
    __m512i w[Panels];
    for (int p = 0; p < Panels; ++p) w[p] = _mm512_load_si512(panel + p * panel_stride + quad * kQuadBytes);
    for (int r = 0; r < Rows; ++r) {
      int32_t four;
      std::memcpy(&four, q + r * ldq + quad * 4, sizeof(four));
      const __m512i x = _mm512_set1_epi32(four);
      for (int p = 0; p < Panels; ++p) sums[r][p] = _mm512_dpbusd_epi32(sums[r][p], x, w[p]);
    }
  }
  const __mmask16 last = static_cast<__mmask16>((1u << valid_last) - 1u);
  for (int p = 0; p < Panels; ++p) {
    // The offset's share: 128 x the channel's sum of q.
    const __m512i correction = _mm512_slli_epi32(_mm512_loadu_si512(channel_sums + p * kWidth), 7);
    const __m512 scales = _mm512_loadu_ps(channel_scales + p * kWidth);
    for (int r = 0; r < Rows; ++r) {
      const __m512 total = _mm512_cvtepi32_ps(_mm512_sub_epi32(sums[r][p], correction));
      const __m512 value = _mm512_mul_ps(total, _mm512_mul_ps(_mm512_set1_ps(row_scales[r]), scales));
      if (p == Panels - 1 && valid_last < kWidth)
        _mm512_mask_storeu_ps(c + r * ldc + p * kWidth, last, value);
      else
        _mm512_storeu_ps(c + r * ldc + p * kWidth, value);
    }
  }
}

// AVX2: Rows x 16 channels in Rows * 2 registers of 8 int32 sums.
template <int Rows, int Panels>
__attribute__((target("avx2"))) void tile_avx2(const uint8_t* q, int64_t ldq, const float* row_scales,
                                                const int8_t* panel, int64_t quads, const float* channel_scales,
                                                const int32_t* channel_sums, float* c, int64_t ldc, int valid_last) {
  static_assert(Panels == 1, "one panel: two registers a row");
  (void)channel_sums;  // signed activations: nothing to correct
  __m256i low[Rows], high[Rows];
  for (int r = 0; r < Rows; ++r) low[r] = high[r] = _mm256_setzero_si256();
  const __m256i ones = _mm256_set1_epi16(1);
  for (int64_t quad = 0; quad < quads; ++quad) {
    const __m256i w_low = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + quad * kQuadBytes));
    const __m256i w_high = _mm256_load_si256(reinterpret_cast<const __m256i*>(panel + quad * kQuadBytes + 32));
    for (int r = 0; r < Rows; ++r) {
      int32_t four;
      std::memcpy(&four, q + r * ldq + quad * 4, sizeof(four));
      const __m256i x = _mm256_set1_epi32(four);
      const __m256i magnitude = _mm256_abs_epi8(x);
      // |x| * (w with x's sign) = x * w; pairs of such products fit int16 (2 * 127 * 127 < 32768).
      low[r] = _mm256_add_epi32(
          low[r], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w_low, x)), ones));
      high[r] = _mm256_add_epi32(
          high[r], _mm256_madd_epi16(_mm256_maddubs_epi16(magnitude, _mm256_sign_epi8(w_high, x)), ones));
    }
  }
  const __m256 scales_low = _mm256_loadu_ps(channel_scales), scales_high = _mm256_loadu_ps(channel_scales + 8);
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask_low = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid_last), lanes);
  const __m256i mask_high = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid_last - 8), lanes);
  for (int r = 0; r < Rows; ++r) {
    const __m256 row_scale = _mm256_set1_ps(row_scales[r]);
    const __m256 value_low = _mm256_mul_ps(_mm256_cvtepi32_ps(low[r]), _mm256_mul_ps(row_scale, scales_low));
    const __m256 value_high = _mm256_mul_ps(_mm256_cvtepi32_ps(high[r]), _mm256_mul_ps(row_scale, scales_high));
    _mm256_maskstore_ps(c + r * ldc, mask_low, value_low);
    _mm256_maskstore_ps(c + r * ldc + 8, mask_high, value_high);
  }
}

using Tile = void (*)(const uint8_t*, int64_t, const float*, const int8_t*, int64_t, const float*, const int32_t*,
                      float*, int64_t, int);

template <int Panels, int... Rows>
constexpr std::array<Tile, sizeof...(Rows) + 1> vnni_tiles(std::integer_sequence<int, 0, Rows...>) {
  return {nullptr, &tile_vnni<Rows, Panels>...};
}
template <int... Rows>
constexpr std::array<Tile, sizeof...(Rows) + 1> avx2_tiles(std::integer_sequence<int, 0, Rows...>) {
  return {nullptr, &tile_avx2<Rows, 1>...};
}

// VNNI 4 rows x 2 panels (8 sums); AVX2 4 rows x 1 panel (8 sums of 16: the rest hold the weights, x, |x|
// and the products on their way). Measured on an AMD EPYC (Zen 4), one thread, 256 x 768/1024/8000 x 256: 4-8
// rows 3.2-4.3x OpenBLAS's fp32, 10 rows 2.0-2.2x, 12 rows 1.8-1.9x (GCC 12 moves the sums through other
// registers and the stack at every step there).
constexpr int kVnniRows = 4, kAvx2Rows = 4;
constexpr auto kVnniTwo = vnni_tiles<2>(std::make_integer_sequence<int, kVnniRows + 1>{});
constexpr auto kVnniOne = vnni_tiles<1>(std::make_integer_sequence<int, kVnniRows + 1>{});
constexpr auto kAvx2One = avx2_tiles(std::make_integer_sequence<int, kAvx2Rows + 1>{});

#endif

}  // namespace

Int8Kernel int8_kernel() { return cpu_has_avx512_vnni() ? Int8Kernel::Avx512Vnni : Int8Kernel::Avx2; }

bool int8_offset(Int8Kernel kernel) { return kernel == Int8Kernel::Avx512Vnni; }

void quantize_rows(const float* x, int64_t rows, int64_t k, int64_t quads, bool offset, uint8_t* q, float* scales) {
  for (int64_t r = 0; r < rows; ++r) {
#if defined(__x86_64__)
    if (cpu_isa() != Isa::Portable) {
      quantize_row_avx2(x + r * k, k, quads, offset, q + r * quads * 4, scales + r);
      continue;
    }
#endif
    quantize_row_portable(x + r * k, k, quads, offset, q + r * quads * 4, scales + r);
  }
}

void packed_gemm_i8(const uint8_t* q, const float* scales, int64_t m, const PackedMatrix& b, int64_t panel_begin,
                    int64_t panel_end, float* c, int64_t ldc, const GemmEpilogue& epilogue, Int8Kernel kernel) {
#if defined(__x86_64__)
  const int64_t quads = b.quads(), ldq = quads * 4, n = b.rows();
  const bool vnni = kernel == Int8Kernel::Avx512Vnni;
  const int64_t tile_rows = vnni ? kVnniRows : kAvx2Rows;
  for (int64_t p = panel_begin; p < panel_end;) {
    const int panels = vnni && p + 1 < panel_end ? 2 : 1;
    const int64_t begin = p * kWidth, end = std::min(n, (p + panels) * kWidth);
    const int valid_last = static_cast<int>(end - (p + panels - 1) * kWidth);
    for (int64_t r = 0; r < m; r += tile_rows) {
      const int rows = static_cast<int>(std::min(tile_rows, m - r));
      const Tile tile = vnni ? (panels == 2 ? kVnniTwo : kVnniOne)[rows] : kAvx2One[rows];
      float* block = c + r * ldc;
      tile(q + r * ldq, ldq, scales + r, b.i8_panel(p), quads, b.scales() + begin, b.sums() + begin, block + begin,
           ldc, valid_last);
      finish_block(block, rows, ldc, begin, end, epilogue);
    }
    p += panels;
  }
#else
  (void)q, (void)scales, (void)m, (void)b, (void)panel_begin, (void)panel_end, (void)c, (void)ldc, (void)epilogue,
      (void)kernel;
  SEQTRANS_CHECK(false, "packed_gemm_i8: no int8 kernels on this CPU");
#endif
}

}  // namespace seqtrans::cpu
