#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

void add_bias(Tensor& x, const Tensor& bias) {
  check_rank("add_bias", "x", x, 2);
  check_float("add_bias", "x", x);
  check_rank("add_bias", "bias", bias, 1);
  check_extent("add_bias", "bias", bias, 0, x.dim(1));
  check_like("add_bias", "bias", bias, x);
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::add_bias(x, bias); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(add_bias, x, bias); break;
  }
}

}  // namespace seqtrans::ops
