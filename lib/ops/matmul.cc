#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor matmul(const Tensor& a, const Tensor& b, const MatmulOptions& options) {
  check_rank("matmul", "a", a, 2);
  check_rank("matmul", "b", b, 2);
  check_float("matmul", "a", a);
  check_same_device("matmul", a, b);
  SEQTRANS_CHECK(a.dtype() == b.dtype(), "matmul: a is {} but b is {}", dtype_name(a.dtype()), dtype_name(b.dtype()));
  const int64_t k = a.dim(1);
  const int64_t n = options.transpose_b ? b.dim(0) : b.dim(1);
  check_extent("matmul", "b", b, options.transpose_b ? 1 : 0, k);
  const DataType output = options.fp32_output ? DataType::F32 : a.dtype();
  SEQTRANS_CHECK(!options.activation || options.bias != nullptr, "matmul: an activation epilogue needs a bias");
  if (options.bias != nullptr) {
    check_rank("matmul", "bias", *options.bias, 1);
    check_dtype("matmul", "bias", *options.bias, output);
    check_extent("matmul", "bias", *options.bias, 0, n);
    check_same_device("matmul", a, *options.bias);
  }
  if (options.prepared_b != nullptr) {
    SEQTRANS_CHECK(options.transpose_b && options.alpha == 1.0f, "matmul: a prepared b takes transpose_b and alpha 1");
    SEQTRANS_CHECK(options.prepared_b->rows() == n && options.prepared_b->cols() == k,
                   "matmul: the prepared b is [{}, {}], b is [{}, {}]", options.prepared_b->rows(),
                   options.prepared_b->cols(), n, k);
  }
  Tensor c({a.dim(0), n}, output, a.device());
  const ProfileScope profile("gemm");
  switch (a.device()) {
    case Device::CPU: cpu::matmul(a, b, c, options); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(matmul, a, b, c, options); break;
  }
  return c;
}

}  // namespace seqtrans::ops
