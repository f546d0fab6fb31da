#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

void copy_prefix(const Tensor& src, Tensor& dst) {
  SEQTRANS_CHECK(src.defined() && dst.defined(), "copy_prefix: src and dst must be defined");
  SEQTRANS_CHECK(src.rank() >= 2 && src.rank() == dst.rank(),
                 "copy_prefix: src {} and dst {} must have the same rank, at least 2", shape_string(src.shape()),
                 shape_string(dst.shape()));
  bool trailing_equal = true;
  for (int axis = 2; axis < src.rank(); ++axis) trailing_equal = trailing_equal && src.dim(axis) == dst.dim(axis);
  SEQTRANS_CHECK(src.dim(0) == dst.dim(0) && src.dim(1) <= dst.dim(1) && trailing_equal,
                 "copy_prefix: src {} does not fit the leading rows of dst {}", shape_string(src.shape()),
                 shape_string(dst.shape()));
  check_dtype("copy_prefix", "dst", dst, src.dtype());
  check_same_device("copy_prefix", src, dst);
  const ProfileScope profile("other kernels");
  switch (src.device()) {
    case Device::CPU: cpu::copy_prefix(src, dst); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(copy_prefix, src, dst); break;
  }
}

void fill_zero(Tensor& t) {
  SEQTRANS_CHECK(t.defined(), "fill_zero: the tensor must be defined");
  const ProfileScope profile("other kernels");
  switch (t.device()) {
    case Device::CPU: cpu::fill_zero(t); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(fill_zero, t); break;
  }
}

}  // namespace seqtrans::ops
