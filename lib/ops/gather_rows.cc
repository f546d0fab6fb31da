#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

Tensor gather_rows(const Tensor& x, const Tensor& indices) {
  SEQTRANS_CHECK(x.rank() >= 1, "gather_rows: x must have rank >= 1");
  check_rank("gather_rows", "indices", indices, 1);
  check_dtype("gather_rows", "indices", indices, DataType::I32);
  check_same_device("gather_rows", x, indices);
  Shape shape = x.shape();
  shape[0] = indices.dim(0);
  Tensor out(shape, x.dtype(), x.device());
  const ProfileScope profile("other kernels");
  switch (x.device()) {
    case Device::CPU: cpu::gather_rows(x, indices, out); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(gather_rows, x, indices, out); break;
  }
  return out;
}

void copy_with_fed_ids(const Tensor& source, int64_t fed, const Tensor* chosen, Tensor& destination) {
  constexpr const char* kOp = "copy_with_fed_ids";
  check_rank(kOp, "source", source, 1);
  check_dtype(kOp, "source", source, DataType::I32);
  check_like(kOp, "destination", destination, source);
  SEQTRANS_CHECK(destination.shape() == source.shape(), "{}: destination {} for source {}", kOp,
                 shape_string(destination.shape()), shape_string(source.shape()));
  SEQTRANS_CHECK(fed >= 0 && fed <= source.dim(0), "{}: {} fed entries of {}", kOp, fed, source.dim(0));
  if (chosen != nullptr) {
    check_dtype(kOp, "chosen", *chosen, DataType::I32);
    SEQTRANS_CHECK(chosen->rank() == 1 || chosen->rank() == 2, "{}: chosen must be [rows] or [rows, k]", kOp);
    check_same_device(kOp, source, *chosen);
  }
  if (source.elements() == 0) return;
  const ProfileScope profile("other kernels");
  switch (source.device()) {
    case Device::CPU: cpu::copy_with_fed_ids(source, fed, chosen, destination); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(copy_with_fed_ids, source, fed, chosen, destination); break;
  }
}

}  // namespace seqtrans::ops
