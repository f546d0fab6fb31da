#include <cblas.h>

#include <climits>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {
namespace {

// CBLAS takes int extents: a larger one must fail here, not wrap into a negative size.
int blas_extent(int64_t extent, const char* name) {
  SEQTRANS_CHECK(extent <= INT_MAX, "matmul: {} = {} exceeds the BLAS limit of {}", name, extent, INT_MAX);
  return static_cast<int>(extent);
}

}  // namespace

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options) {
  const int m = blas_extent(a.dim(0), "m");
  const int k = blas_extent(a.dim(1), "k");
  const int n = blas_extent(c.dim(1), "n");
  if (m == 0 || n == 0) return;
  cblas_sgemm(CblasRowMajor, CblasNoTrans, options.transpose_b ? CblasTrans : CblasNoTrans, m, n, k, options.alpha,
              a.data<float>(), k, b.data<float>(), options.transpose_b ? k : n, 0.0f, c.data<float>(), n);
  if (options.bias == nullptr) return;
  if (options.activation)
    bias_activation(c, *options.bias, *options.activation);
  else
    add_bias(c, *options.bias);
}

}  // namespace seqtrans::cpu
