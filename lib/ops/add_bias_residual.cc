#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual) {
  const char* op = "add_bias_residual";
  check_rank(op, "x", x, 2);
  check_float(op, "x", x);
  check_rank(op, "bias", bias, 1);
  check_extent(op, "bias", bias, 0, x.dim(1));
  check_like(op, "bias", bias, x);
  check_like(op, "residual", residual, x);
  SEQTRANS_CHECK(residual.shape() == x.shape(), "{}: residual shape {} differs from x shape {}", op,
                 shape_string(residual.shape()), shape_string(x.shape()));
  Tensor out(x.shape(), x.dtype(), x.device());
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::add_bias_residual(x, bias, residual, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(add_bias_residual, x, bias, residual, out); break;
  }
  return out;
}

}  // namespace seqtrans::ops
