#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

void copy(const Tensor& src, Tensor& dst) {
  SEQTRANS_CHECK(src.defined() && dst.defined(), "copy: src and dst must be defined");
  SEQTRANS_CHECK(src.shape() == dst.shape(), "copy: src {} and dst {} differ", shape_string(src.shape()),
                 shape_string(dst.shape()));
  check_dtype("copy", "dst", dst, src.dtype());
  check_same_device("copy", src, dst);
  const ProfileScope profile("other kernels");
  switch (src.device()) {
    case Device::CPU: cpu::copy(src, dst); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(copy, src, dst); break;
  }
}

}  // namespace seqtrans::ops
