#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

std::vector<Tensor> add_bias_split(const Tensor& x, const Tensor& bias, int parts) {
  check_rank("add_bias_split", "x", x, 2);
  check_float("add_bias_split", "x", x);
  check_rank("add_bias_split", "bias", bias, 1);
  check_extent("add_bias_split", "bias", bias, 0, x.dim(1));
  check_like("add_bias_split", "bias", bias, x);
  SEQTRANS_CHECK(parts >= 1 && x.dim(1) % parts == 0, "add_bias_split: width {} is not divisible into {} parts",
                 x.dim(1), parts);
  std::vector<Tensor> outputs;
  for (int i = 0; i < parts; ++i) outputs.emplace_back(Shape{x.dim(0), x.dim(1) / parts}, x.dtype(), x.device());
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::add_bias_split(x, bias, outputs); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(add_bias_split, x, bias, outputs); break;
  }
  return outputs;
}

}  // namespace seqtrans::ops
