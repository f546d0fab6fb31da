// packed_gemm_f32: register tiles of c, each summed over all of k in one pass (k is at most a few hundred
// here: a tile's weight panels stay in L1, and the rows of a in L2, while the tiles of a column stripe run).
#include <algorithm>
#include <array>
#include <cmath>
#include <utility>

#include "cpu/cpu_ops.h"
#include "cpu/packed_gemm.h"
#include "cpu/simd.h"

namespace seqtrans::cpu {
namespace {

constexpr int64_t kWidth = PackedMatrix::kPanelWidth;

// Portable: one row by one panel, each element the same chain as the vector tiles'.
void tile_scalar(const float* a, const float* panel, int64_t k, float* c, int valid_last) {
  for (int j = 0; j < valid_last; ++j) {
    float sum = 0.0f;
    for (int64_t kk = 0; kk < k; ++kk) sum = std::fma(a[kk], panel[kk * kWidth + j], sum);
    c[j] = sum;
  }
}

#if defined(__x86_64__)

// AVX-512: Rows x (Panels x 16) of c in Rows * Panels registers.
template <int Rows, int Panels>
__attribute__((target("avx512f"))) void tile_avx512(const float* a, int64_t lda, const float* panel, int64_t k,
                                                   float* c, int64_t ldc, int valid_last) {
  __m512 sums[Rows][Panels];
  for (int r = 0; r < Rows; ++r)
    for (int p = 0; p < Panels; ++p) sums[r][p] = _mm512_setzero_ps();
  const int64_t panel_stride = k * kWidth;
  for (int64_t kk = 0; kk < k; ++kk) {
    __m512 w[Panels];
    for (int p = 0; p < Panels; ++p) w[p] = _mm512_load_ps(panel + p * panel_stride + kk * kWidth);
    for (int r = 0; r < Rows; ++r) {
      const __m512 x = _mm512_set1_ps(a[r * lda + kk]);
      for (int p = 0; p < Panels; ++p) sums[r][p] = _mm512_fmadd_ps(x, w[p], sums[r][p]);
    }
  }
  const __mmask16 last = static_cast<__mmask16>((1u << valid_last) - 1u);
  for (int r = 0; r < Rows; ++r)
    for (int p = 0; p < Panels; ++p) {
      if (p == Panels - 1 && valid_last < kWidth)
        _mm512_mask_storeu_ps(c + r * ldc + p * kWidth, last, sums[r][p]);
      else
        _mm512_storeu_ps(c + r * ldc + p * kWidth, sums[r][p]);
    }
}

// AVX2: Rows x 16 of c in Rows * 2 registers (at most 12 of 16).
template <int Rows, int Panels>
__attribute__((target("avx2,fma"))) void tile_avx2(const float* a, int64_t lda, const float* panel, int64_t k,
                                                  float* c, int64_t ldc, int valid_last) {
  static_assert(Panels == 1, "one panel: two registers a row");
  __m256 sums[Rows][2];
  for (int r = 0; r < Rows; ++r)
    for (int h = 0; h < 2; ++h) sums[r][h] = _mm256_setzero_ps();
  for (int64_t kk = 0; kk < k; ++kk) {
    __m256 w[2];
    for (int h = 0; h < 2; ++h) w[h] = _mm256_load_ps(panel + kk * kWidth + 8 * h);
    for (int r = 0; r < Rows; ++r) {
      const __m256 x = _mm256_set1_ps(a[r * lda + kk]);
      for (int h = 0; h < 2; ++h) sums[r][h] = _mm256_fmadd_ps(x, w[h], sums[r][h]);
    }
  }
  const __m256i lanes = _mm256_setr_epi32(0, 1, 2, 3, 4, 5, 6, 7);
  const __m256i mask0 = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid_last), lanes);
  const __m256i mask1 = _mm256_cmpgt_epi32(_mm256_set1_epi32(valid_last - 8), lanes);
  for (int r = 0; r < Rows; ++r) {
    _mm256_maskstore_ps(c + r * ldc, mask0, sums[r][0]);
    _mm256_maskstore_ps(c + r * ldc + 8, mask1, sums[r][1]);
  }
}

using Tile = void (*)(const float*, int64_t, const float*, int64_t, float*, int64_t, int);

template <int Panels, int... Rows>
constexpr std::array<Tile, sizeof...(Rows) + 1> avx512_tiles(std::integer_sequence<int, 0, Rows...>) {
  return {nullptr, &tile_avx512<Rows, Panels>...};
}
template <int... Rows>
constexpr std::array<Tile, sizeof...(Rows) + 1> avx2_tiles(std::integer_sequence<int, 0, Rows...>) {
  return {nullptr, &tile_avx2<Rows, 1>...};
}

// Tiles by [rows]: AVX-512 8 rows x 2 panels (16 sums), AVX2 6 rows x 1 panel (12 sums). Measured on an AMD
// EPYC (Zen 4), one thread: 8 or 6 rows 1.11-1.13x OpenBLAS at 256 x 768/1024/8000 x 256, 12 rows 1.06x
// (GCC 12 then keeps fewer of the weights and rows in registers).
constexpr int kAvx512Rows = 8, kAvx2Rows = 6;
constexpr auto kAvx512Two = avx512_tiles<2>(std::make_integer_sequence<int, kAvx512Rows + 1>{});
constexpr auto kAvx512One = avx512_tiles<1>(std::make_integer_sequence<int, kAvx512Rows + 1>{});
constexpr auto kAvx2One = avx2_tiles(std::make_integer_sequence<int, kAvx2Rows + 1>{});

#endif

}  // namespace

void finish_block(float* c, int64_t rows, int64_t ldc, int64_t begin, int64_t end, const GemmEpilogue& epilogue) {
  if (epilogue.bias == nullptr) return;
  if (epilogue.activation)
    bias_activation_columns(c, rows, ldc, begin, end, epilogue.bias, *epilogue.activation);
  else
    add_bias_columns(c, rows, ldc, begin, end, epilogue.bias);
}

void packed_gemm_f32(const float* a, int64_t m, const PackedMatrix& b, int64_t panel_begin, int64_t panel_end,
                     float* c, int64_t ldc, const GemmEpilogue& epilogue, Isa isa) {
  packed_gemm_f32(a, m, F32Panels{b.f32_panel(0), 0, b.rows(), b.cols()}, panel_begin, panel_end, c, ldc, epilogue,
                  isa);
}

void packed_gemm_f32(const float* a, int64_t m, const F32Panels& b, int64_t panel_begin, int64_t panel_end,
                     float* c, int64_t ldc, const GemmEpilogue& epilogue, Isa isa) {
  const int64_t k = b.k, n = b.n;
  if (isa == Isa::Portable) {
    for (int64_t p = panel_begin; p < panel_end; ++p) {
      const int64_t begin = p * kWidth, end = std::min(n, begin + kWidth);
      for (int64_t r = 0; r < m; ++r) tile_scalar(a + r * k, b.panel(p), k, c + r * ldc + begin, static_cast<int>(end - begin));
      finish_block(c, m, ldc, begin, end, epilogue);
    }
    return;
  }
#if defined(__x86_64__)
  const bool wide = isa == Isa::Avx512;
  const int64_t tile_rows = wide ? kAvx512Rows : kAvx2Rows;
  for (int64_t p = panel_begin; p < panel_end;) {
    const int panels = wide && p + 1 < panel_end ? 2 : 1;
    const int64_t begin = p * kWidth, end = std::min(n, (p + panels) * kWidth);
    const int valid_last = static_cast<int>(end - (p + panels - 1) * kWidth);
    for (int64_t r = 0; r < m; r += tile_rows) {
      const int rows = static_cast<int>(std::min(tile_rows, m - r));
      const Tile tile = wide ? (panels == 2 ? kAvx512Two : kAvx512One)[rows] : kAvx2One[rows];
      float* block = c + r * ldc;
      tile(a + r * k, k, b.panel(p), k, block + begin, ldc, valid_last);
      finish_block(block, rows, ldc, begin, end, epilogue);
    }
    p += panels;
  }
#else
  SEQTRANS_CHECK(false, "packed_gemm_f32: no {} kernels on this CPU", isa_name(isa));
#endif
}

void pack_f32_panels(const float* b, bool transpose_b, int64_t n, int64_t k, int64_t panel_begin, int64_t panel_end,
                     float* out) {
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    float* panel = out + (p - panel_begin) * k * kWidth;
    for (int64_t j = 0; j < kWidth; ++j) {
      const int64_t row = p * kWidth + j;
      for (int64_t kk = 0; kk < k; ++kk)
        panel[kk * kWidth + j] = row >= n ? 0.0f : transpose_b ? b[row * k + kk] : b[kk * n + row];
    }
  }
}

}  // namespace seqtrans::cpu
