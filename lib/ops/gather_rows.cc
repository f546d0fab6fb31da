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

}  // namespace seqtrans::ops
