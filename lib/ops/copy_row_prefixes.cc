#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

void copy_row_prefixes(const Tensor& src, const Tensor* index, const Tensor& lengths, Tensor& dst) {
  const char* op = "copy_row_prefixes";
  SEQTRANS_CHECK(src.defined() && dst.defined() && lengths.defined(), "{}: src, lengths and dst must be defined", op);
  SEQTRANS_CHECK(src.rank() >= 2 && src.rank() == dst.rank(), "{}: src {} and dst {} must have the same rank, at least 2",
                 op, shape_string(src.shape()), shape_string(dst.shape()));
  bool trailing_equal = true;
  for (int axis = 2; axis < src.rank(); ++axis) trailing_equal = trailing_equal && src.dim(axis) == dst.dim(axis);
  SEQTRANS_CHECK(trailing_equal, "{}: src {} and dst {} differ past their second axis", op, shape_string(src.shape()),
                 shape_string(dst.shape()));
  check_dtype(op, "dst", dst, src.dtype());
  check_dtype(op, "lengths", lengths, DataType::I32);
  SEQTRANS_CHECK(lengths.rank() == 1 && lengths.dim(0) <= dst.dim(0), "{}: lengths {} for {} rows of dst", op,
                 shape_string(lengths.shape()), dst.dim(0));
  check_same_device(op, src, dst);
  check_same_device(op, src, lengths);
  if (index != nullptr) {
    check_dtype(op, "index", *index, DataType::I32);
    SEQTRANS_CHECK(index->rank() == 1 && index->dim(0) == lengths.dim(0), "{}: index {} for lengths {}", op,
                   shape_string(index->shape()), shape_string(lengths.shape()));
    check_same_device(op, src, *index);
  } else {
    SEQTRANS_CHECK(lengths.dim(0) <= src.dim(0), "{}: lengths {} for {} rows of src", op,
                   shape_string(lengths.shape()), src.dim(0));
  }
  const ProfileScope profile("other kernels");
  switch (src.device()) {
    case Device::CPU: cpu::copy_row_prefixes(src, index, lengths, dst); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(copy_row_prefixes, src, index, lengths, dst); break;
  }
}

}  // namespace seqtrans::ops
