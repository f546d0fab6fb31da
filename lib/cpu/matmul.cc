#include <cblas.h>

#include <algorithm>
#include <climits>
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

// The longest k for which OpenBLAS sums each element of c as one chain of fused multiply-adds: its first
// block of k (GEMM_Q) is at least this long on every x86-64 target it has; past it, it adds the blocks' sums.
constexpr int64_t kChainedK = 256;

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

}  // namespace

bool packed_matmul_exact(int64_t rows, int64_t cols, int64_t k) {
  return k <= kChainedK && !blas_small_path(rows, cols, k);
}

namespace {

// Whether a product of m rows over `packed` [n, k], its columns in parts of `step_blocks` blocks, takes the
// packed kernel on any part, counting it (PackedMatrix::use) if so: false while the panels are not written
// (the plain path then gives the same bits). The widest part decides: a narrower one only meets OpenBLAS's
// small-matrix rule sooner.
bool reads_packed(const PackedMatrix& packed, int64_t m, int64_t n, int64_t k, int64_t step_blocks, bool invariant) {
  const int64_t widest = std::min(n, step_blocks * kColumnBlock);
  const bool wanted = invariant ? k <= kChainedK : packed_matmul_exact(m, widest, k);
  return wanted && packed.use();
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options) {
  const int m = blas_extent(a.dim(0), "m");
  const int k = blas_extent(a.dim(1), "k");
  const int n = blas_extent(c.dim(1), "n");
  if (m == 0 || n == 0) return;
  const float* a_values = a.data<float>();
  const float* b_values = b.data<float>();
  float* c_values = c.data<float>();
  const float* bias = options.bias != nullptr ? options.bias->data<float>() : nullptr;
  // Each part is c[:, begin:end] = a x b[:, begin:end]: every element sums the same products in the same
  // order whatever the split, so the result does not depend on the thread count; nor on the row count in
  // batch-invariant mode (gemm_part, and the packed kernel's one chain over k). The mode is the calling
  // thread's: the parts run on the pool's.
  const bool invariant = batch_invariant();
  const auto* packed = static_cast<const PackedMatrix*>(options.prepared_b);
  if (packed != nullptr && packed->format() == ops::WeightFormat::Int8)
    return matmul_int8(a_values, m, k, *packed, c_values, n, {bias, options.activation});
  const Isa isa = cpu_isa();
  const int64_t blocks = (n + kColumnBlock - 1) / kColumnBlock;
  const int64_t block_work = int64_t{m} * k * kColumnBlock;
  const int64_t grain = std::max<int64_t>(1, kMinPartWork / block_work);
  if (packed != nullptr && !reads_packed(*packed, m, n, k, parallel_for_step(blocks, grain), invariant))
    packed = nullptr;
  const auto columns = [&](int64_t block_begin, int64_t block_end) {
    const int64_t begin = block_begin * kColumnBlock, end = std::min<int64_t>(n, block_end * kColumnBlock);
    // The packed kernel where it gives the plain path's bits; OpenBLAS on b itself elsewhere.
    // In batch-invariant mode the small path is not taken, so the packed kernel's chain is the bits at any k
    // it covers.
    if (packed != nullptr && (invariant ? k <= kChainedK : packed_matmul_exact(m, end - begin, k))) {
      static_assert(kColumnBlock == PackedMatrix::kPanelWidth, "a block of columns is a panel");
      packed_gemm_f32(a_values, m, *packed, block_begin, block_end, c_values, n, {bias, options.activation}, isa);
      return;
    }
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
