#include <cblas.h>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options) {
  const int m = static_cast<int>(a.dim(0));
  const int k = static_cast<int>(a.dim(1));
  const int n = static_cast<int>(c.dim(1));
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
