#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor gated_activation(const Tensor& gate_up) {
  check_rank("gated_activation", "gate_up", gate_up, 2);
  check_float("gated_activation", "gate_up", gate_up);
  SEQTRANS_CHECK(gate_up.dim(1) % 2 == 0, "gated_activation: gate_up width {} is not 2 * f", gate_up.dim(1));
  Tensor out({gate_up.dim(0), gate_up.dim(1) / 2}, gate_up.dtype(), gate_up.device());
  const ProfileScope profile("other kernels");
  switch (gate_up.device()) {
    case Device::CPU: cpu::gated_activation(gate_up, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(gated_activation, gate_up, out); break;
  }
  return out;
}

}  // namespace seqtrans::ops
