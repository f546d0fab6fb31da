#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {
namespace {

void check_rms_norm(const char* op, const Tensor& x, const RmsNormWeights& norm) {
  check_rank(op, "x", x, 2);
  check_float(op, "x", x);
  check_rank(op, "weight", norm.weight, 1);
  check_extent(op, "weight", norm.weight, 0, x.dim(1));
  check_like(op, "weight", norm.weight, x);
  SEQTRANS_CHECK(norm.epsilon >= 0.0f, "{}: epsilon {} is negative", op, norm.epsilon);
}

}  // namespace

Tensor rms_norm(const Tensor& x, const RmsNormWeights& norm) {
  check_rms_norm("rms_norm", x, norm);
  Tensor out(x.shape(), x.dtype(), x.device());
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::rms_norm(x, nullptr, norm, nullptr, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(rms_norm, x, nullptr, norm, nullptr, out); break;
  }
  return out;
}

ResidualNorm add_residual_rms_norm(const Tensor& x, const Tensor& residual, const RmsNormWeights& norm) {
  const char* op = "add_residual_rms_norm";
  check_rms_norm(op, x, norm);
  check_like(op, "residual", residual, x);
  SEQTRANS_CHECK(residual.shape() == x.shape(), "{}: residual shape {} differs from x shape {}", op,
                 shape_string(residual.shape()), shape_string(x.shape()));
  ResidualNorm out{Tensor(x.shape(), x.dtype(), x.device()), Tensor(x.shape(), x.dtype(), x.device())};
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::rms_norm(x, &residual, norm, &out.sum, out.normalized); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(rms_norm, x, &residual, norm, &out.sum, out.normalized); break;
  }
  return out;
}

}  // namespace seqtrans::ops
