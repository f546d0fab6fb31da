#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor add_bias_residual(const Tensor& x, const Tensor& bias, const Tensor& residual) {
  const char* op = "add_bias_residual";
  check_rank(op, "x", x, 2);
  check_float(op, "x", x);
  check_bias_residual(op, x, bias, residual);
  Tensor out(x.shape(), x.dtype(), x.device());
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::add_bias_residual(x, bias, residual, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(add_bias_residual, x, bias, residual, out); break;
  }
  return out;
}

}  // namespace seqtrans::ops
