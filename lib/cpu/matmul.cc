// matmul on the CPU. Where the CPU has AVX2 or AVX-512, the packed kernels (cpu/packed_gemm.h) take every
// fp32 product, each element one chain of fused multiply-adds over k: the bits do not depend on the thread
// count, the row count or the kernels OpenBLAS picks (OPENBLAS_CORETYPE=Haswell, set on some machines, sums in
// orders that change with the split), and they were faster than OpenBLAS at every shape measured
// (docs/BENCHMARKS.md). OpenBLAS takes the products of other CPUs, and int8 weights their own kernels.
#include <cblas.h>

#include <algorithm>
#include <climits>
#include <cmath>
#include <cstdint>
#include <vector>

#include "core/batch_invariance.h"
#include "cpu/cpu_ops.h"
#include "cpu/packed_gemm.h"
#include "cpu/thread_pool.h"

namespace seqtrans::cpu {
namespace {

// CBLAS takes int extents: a larger one must fail here, not wrap into a negative size.
int blas_extent(int64_t extent, const char* name) {
  SEQTRANS_CHECK(extent <= INT_MAX, "matmul: {} = {} exceeds the BLAS limit of {}", name, extent, INT_MAX);
  return static_cast<int>(extent);
}

// Columns of c are dealt to threads in blocks of this many (the BLAS kernels' width: whole blocks keep
// every part on the kernels' full-width path).
constexpr int64_t kColumnBlock = 16;
// A part gets at least this many multiply-adds: below it, handing it to another thread costs more than it
// saves (a wake-up is a few microseconds; this is about 20 us of one core).
constexpr int64_t kMinPartWork = int64_t{1} << 19;

// Whether OpenBLAS (0.3.x) may take a product of `rows` x `cols` over k to its small-matrix kernels, whose
// sums run in other orders: in its column-major terms (cols x rows, b transposed) it may where
// cols * rows * k <= 100^3, cols * rows <= 1200 and k >= 32 (Skylake-X and later targets; others have none).
bool blas_small_path(int64_t rows, int64_t cols, int64_t k) {
  return static_cast<double>(cols) * rows * k <= 1e6 && cols * rows <= 1200 && k >= 32;
}

// In batch-invariant mode a call that OpenBLAS may take to its small-matrix kernels (blas_small_path; for b
// not transposed, its rule is rows * columns * depth <= 10^6 alone) gets zero rows added until it may not, so
// that every row count takes the packed kernels: 1 or 2 rows of a 512-wide product differ from 3 or more
// otherwise. Not by default: the small kernel is about 6x faster at 1 row of 512 x 512 (it reads b as it is).
constexpr int64_t kSmallKernelMaxProducts = 1000000, kSmallKernelMaxOutputs = 1200;

int64_t packed_kernel_rows(int64_t rows, int64_t columns, int64_t depth, bool transpose_b) {
  if (transpose_b) {
    if (!blas_small_path(rows, columns, depth)) return rows;
    return std::max(rows, std::min(kSmallKernelMaxOutputs / columns, kSmallKernelMaxProducts / (columns * depth)) + 1);
  }
  if (rows * columns * depth > kSmallKernelMaxProducts) return rows;
  return std::max(rows, kSmallKernelMaxProducts / (columns * depth) + 1);
}

// c[:, begin:end] (row stride ldc) = alpha a x b_part; through the packed kernels at any row count when
// `invariant`.
void gemm_part(const float* a, int m, int k, const float* b_part, int ldb, bool transpose_b, float alpha, int64_t begin,
               int64_t end, float* c, int ldc, bool invariant) {
  const int columns = static_cast<int>(end - begin);
  const auto transpose = transpose_b ? CblasTrans : CblasNoTrans;
  const int64_t rows = invariant ? packed_kernel_rows(m, columns, k, transpose_b) : m;
  if (rows == m) {
    cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose, m, columns, k, alpha, a, k, b_part, ldb, 0.0f, c + begin, ldc);
    return;
  }
  thread_local std::vector<float> padded_a, padded_c;
  padded_a.assign(static_cast<size_t>(rows * k), 0.0f);
  std::copy(a, a + static_cast<int64_t>(m) * k, padded_a.begin());
  padded_c.resize(static_cast<size_t>(rows * columns));
  cblas_sgemm(CblasRowMajor, CblasNoTrans, transpose, static_cast<int>(rows), columns, k, alpha, padded_a.data(), k,
              b_part, ldb, 0.0f, padded_c.data(), columns);
  for (int r = 0; r < m; ++r)
    std::copy(padded_c.begin() + int64_t{r} * columns, padded_c.begin() + int64_t{r + 1} * columns,
              c + int64_t{r} * ldc + begin);
}

// The int8 kernels do about four times the multiply-adds of fp32 in the same time: a part's least work is
// counted in fp32 terms.
constexpr int64_t kInt8Speedup = 4;

// c = a x b^T with b in WeightFormat::Int8: a's rows quantized once, then the column parts.
void matmul_int8(const float* a, int64_t m, int64_t k, const PackedMatrix& b, float* c, int64_t n,
                 const GemmEpilogue& epilogue) {
  const Int8Kernel kernel = int8_kernel();
  const int64_t row_bytes = b.quads() * 4;
  std::vector<uint8_t> q(static_cast<size_t>(m * row_bytes));
  std::vector<float> scales(static_cast<size_t>(m));
  parallel_for(m, std::max<int64_t>(1, kMinPartWork / (16 * k)), [&](int64_t begin, int64_t end) {
    quantize_rows(a + begin * k, end - begin, k, b.quads(), int8_offset(kernel), q.data() + begin * row_bytes,
                  scales.data() + begin);
  });
  const int64_t block_work = m * k * kColumnBlock;
  parallel_for(b.panels(), std::max<int64_t>(1, kInt8Speedup * kMinPartWork / block_work),
               [&](int64_t begin, int64_t end) {
                 packed_gemm_i8(q.data(), scales.data(), m, b, begin, end, c, n, epilogue, kernel);
               });
}

// Panels of an unprepared weight packed at once in matmul_in_one_chain: 256 KiB at k = 512, within L2.
constexpr int64_t kPanelsPackedAtOnce = 8;

// A product in the packed kernels' one chain over k: over a prepared weight's panels once they are written
// (PackedMatrix::use, counted here), before that over each part's panels packed on the fly, the same bits.
// Each element is one chain for any split of rows and columns: the same bits at any thread count and, row by
// row, at any row count (batch-invariant mode asks nothing more).
void matmul_in_one_chain(const float* a, int64_t m, int64_t k, const float* b, const PackedMatrix* packed,
                         const ops::MatmulOptions& options, float* c, int64_t n, int64_t grain, Isa isa) {
  static_assert(kColumnBlock == PackedMatrix::kPanelWidth, "a block of columns is a panel");
  if (packed != nullptr && !packed->use()) packed = nullptr;
  const float* bias = options.bias != nullptr ? options.bias->data<float>() : nullptr;
  // alpha scales the sums before the epilogue: the kernel then runs without one.
  const bool scaled = options.alpha != 1.0f;
  const GemmEpilogue epilogue{scaled ? nullptr : bias, options.activation};
  const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
  parallel_for(blocks, grain, [&](int64_t block_begin, int64_t block_end) {
    if (packed != nullptr) {
      packed_gemm_f32(a, m, *packed, block_begin, block_end, c, n, epilogue, isa);
    } else {
      // The part's panels packed a few at a time into 64-byte aligned memory (the kernels' aligned loads),
      // which the thread's next part reuses.
      thread_local std::vector<float> buffer;
      buffer.resize(static_cast<size_t>(kPanelsPackedAtOnce * k * kColumnBlock + 16));
      float* panels = buffer.data() + (16 - reinterpret_cast<uintptr_t>(buffer.data()) / sizeof(float) % 16) % 16;
      for (int64_t first = block_begin; first < block_end; first += kPanelsPackedAtOnce) {
        const int64_t last = std::min(block_end, first + kPanelsPackedAtOnce);
        pack_f32_panels(b, options.transpose_b, n, k, first, last, panels);
        packed_gemm_f32(a, m, F32Panels{panels, first, n, k}, first, last, c, n, epilogue, isa);
      }
    }
    if (!scaled) return;
    const int64_t begin = block_begin * kColumnBlock, end = std::min(n, block_end * kColumnBlock);
    for (int64_t r = 0; r < m; ++r)
      for (int64_t j = begin; j < end; ++j) c[r * n + j] *= options.alpha;
    finish_block(c, m, n, begin, end, {bias, options.activation});
  });
}

}  // namespace

bool blas_sums_in_one_chain() {
  static const bool one_chain = [] {
    struct Shape {
      int m, n, k;
    };
    // Past the small-matrix kernels (blas_small_path), k within OpenBLAS's first block (at least 256 on every
    // x86-64 target), with edge tiles in both directions.
    for (const Shape shape : {Shape{7, 200, 256}, Shape{33, 48, 64}, Shape{200, 40, 100}}) {
      const auto [m, n, k] = shape;
      std::vector<float> a(static_cast<size_t>(m * k)), b(static_cast<size_t>(n * k)), c(static_cast<size_t>(m * n));
      uint32_t state = 12345;
      const auto next = [&state] {
        state = state * 1664525u + 1013904223u;
        return static_cast<float>(state >> 8) / static_cast<float>(1u << 23) - 1.0f;  // [-1, 1)
      };
      for (float& x : a) x = next();
      for (float& x : b) x = next();
      cblas_sgemm(CblasRowMajor, CblasNoTrans, CblasTrans, m, n, k, 1.0f, a.data(), k, b.data(), k, 0.0f, c.data(), n);
      for (int i = 0; i < m; ++i)
        for (int j = 0; j < n; ++j) {
          float sum = 0.0f;
          for (int kk = 0; kk < k; ++kk) sum = std::fma(a[i * k + kk], b[j * k + kk], sum);
          if (sum != c[i * n + j]) return false;
        }
    }
    return true;
  }();
  return one_chain;
}

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options) {
  const int m = blas_extent(a.dim(0), "m");
  const int k = blas_extent(a.dim(1), "k");
  const int n = blas_extent(c.dim(1), "n");
  if (m == 0 || n == 0) return;
  const float* a_values = a.data<float>();
  float* c_values = c.data<float>();
  const float* bias = options.bias != nullptr ? options.bias->data<float>() : nullptr;
  const auto* packed = static_cast<const PackedMatrix*>(options.prepared_b);
  // A prepared weight's plain tensor may be shape only (WeightLoader::get_dense): int8's panels are all there
  // is; fp32 panels not written yet are packed on the fly from the matrix's own copy of the plain values,
  // which `source` keeps alive through the product.
  if (packed != nullptr && packed->format() == ops::WeightFormat::Int8)
    return matmul_int8(a_values, m, k, *packed, c_values, n, {bias, options.activation});
  const Tensor source = b.has_data() || packed == nullptr || packed->packed() ? b : packed->source();
  const float* b_values = source.has_data() ? source.data<float>() : nullptr;  // null: the panels are written
  const Isa isa = cpu_isa();
  const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
  const int64_t block_work = int64_t{m} * k * kColumnBlock;
  const int64_t grain = std::max<int64_t>(1, kMinPartWork / block_work);
  // The packed kernels take every product where the CPU has them (AVX2 or AVX-512: faster than OpenBLAS at
  // every shape measured, docs/BENCHMARKS.md), and where OpenBLAS does not sum in one chain; OpenBLAS the rest.
  if (isa != Isa::Portable || !blas_sums_in_one_chain())
    return matmul_in_one_chain(a_values, m, k, b_values, packed, options, c_values, n, grain, isa);
  // OpenBLAS (no packed kernels on this CPU). Each part is c[:, begin:end] = a x b[:, begin:end]: its kernels
  // sum each element in one chain whatever the split (blas_sums_in_one_chain), so the result does not depend
  // on the thread count; nor on the row count in batch-invariant mode (gemm_part). The mode is the calling
  // thread's: the parts run on the pool's.
  const bool invariant = batch_invariant();
  const auto columns = [&](int64_t block_begin, int64_t block_end) {
    const int64_t begin = block_begin * kColumnBlock, end = std::min<int64_t>(n, block_end * kColumnBlock);
    const float* b_part = options.transpose_b ? b_values + begin * k : b_values + begin;
    gemm_part(a_values, m, k, b_part, options.transpose_b ? k : n, options.transpose_b, options.alpha, begin, end,
              c_values, n, invariant);
    if (bias == nullptr) return;
    if (options.activation)
      bias_activation_columns(c_values, m, n, begin, end, bias, *options.activation);
    else
      add_bias_columns(c_values, m, n, begin, end, bias);
  };
  parallel_for(blocks, grain, columns);
}

}  // namespace seqtrans::cpu
