#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

void bias_activation(Tensor& x, const Tensor& bias, Activation activation) {
  check_rank("bias_activation", "x", x, 2);
  check_float("bias_activation", "x", x);
  check_rank("bias_activation", "bias", bias, 1);
  check_extent("bias_activation", "bias", bias, 0, x.dim(1));
  check_like("bias_activation", "bias", bias, x);
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::bias_activation(x, bias, activation); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(bias_activation, x, bias, activation); break;
  }
}

}  // namespace seqtrans::ops
