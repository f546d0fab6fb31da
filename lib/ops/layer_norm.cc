#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {
namespace {

void check_norm(const char* op, const Tensor& x, const LayerNormWeights& norm) {
  check_rank(op, "x", x, 2);
  check_float(op, "x", x);
  check_rank(op, "gamma", norm.gamma, 1);
  check_rank(op, "beta", norm.beta, 1);
  check_extent(op, "gamma", norm.gamma, 0, x.dim(1));
  check_extent(op, "beta", norm.beta, 0, x.dim(1));
  check_like(op, "gamma", norm.gamma, x);
  check_like(op, "beta", norm.beta, x);
}

}  // namespace

Tensor add_bias_residual_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                    const LayerNormWeights& norm) {
  const char* op = "add_bias_residual_layer_norm";
  check_norm(op, x, norm);
  check_bias_residual(op, x, bias, residual);
  Tensor out(x.shape(), x.dtype(), x.device());
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::add_bias_residual_layer_norm(x, bias, residual, norm, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(add_bias_residual_layer_norm, x, bias, residual, norm, out); break;
  }
  return out;
}

ResidualNorm add_bias_residual_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                    const LayerNormWeights& norm) {
  const char* op = "add_bias_residual_norm";
  check_norm(op, x, norm);
  check_bias_residual(op, x, bias, residual);
  ResidualNorm out{Tensor(x.shape(), x.dtype(), x.device()), Tensor(x.shape(), x.dtype(), x.device())};
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::add_bias_residual_norm(x, bias, residual, norm, out.sum, out.normalized); break;
    case Device::CUDA:
      SEQTRANS_ON_CUDA(add_bias_residual_norm, x, bias, residual, norm, out.sum, out.normalized);
      break;
  }
  return out;
}

Tensor layer_norm(const Tensor& x, const LayerNormWeights& norm) {
  check_norm("layer_norm", x, norm);
  Tensor out(x.shape(), x.dtype(), x.device());
  switch (x.device()) {
    case Device::CPU: cpu::layer_norm(x, norm, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(layer_norm, x, norm, out); break;
  }
  return out;
}

}  // namespace seqtrans::ops
