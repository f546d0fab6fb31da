#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

void scatter_prefix(const Tensor& src, const Tensor& rows, Tensor& dst) {
  const char* op = "scatter_prefix";
  SEQTRANS_CHECK(src.defined() && dst.defined(), "{}: src and dst must be defined", op);
  SEQTRANS_CHECK(src.rank() >= 2 && src.rank() == dst.rank(), "{}: src {} and dst {} must have the same rank, at least 2",
                 op, shape_string(src.shape()), shape_string(dst.shape()));
  bool trailing_equal = true;
  for (int axis = 2; axis < src.rank(); ++axis) trailing_equal = trailing_equal && src.dim(axis) == dst.dim(axis);
  SEQTRANS_CHECK(src.dim(1) <= dst.dim(1) && trailing_equal, "{}: rows of src {} do not fit the rows of dst {}", op,
                 shape_string(src.shape()), shape_string(dst.shape()));
  check_rank(op, "rows", rows, 1);
  check_dtype(op, "rows", rows, DataType::I32);
  check_extent(op, "rows", rows, 0, src.dim(0));
  check_dtype(op, "dst", dst, src.dtype());
  check_same_device(op, src, dst);
  check_same_device(op, src, rows);
  const ProfileScope profile("other kernels");
  switch (src.device()) {
    case Device::CPU: cpu::scatter_prefix(src, rows, dst); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(scatter_prefix, src, rows, dst); break;
  }
}

}  // namespace seqtrans::ops
