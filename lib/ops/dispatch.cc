#include "ops/dispatch.h"

namespace seqtrans::ops {

void check_rank(const char* op, const char* operand, const Tensor& x, int rank) {
  SEQTRANS_CHECK(x.defined(), "{}: {} is undefined", op, operand);
  SEQTRANS_CHECK(x.rank() == rank, "{}: {} must have rank {}, got shape {}", op, operand, rank,
                 shape_string(x.shape()));
}

void check_dtype(const char* op, const char* operand, const Tensor& x, DataType dtype) {
  SEQTRANS_CHECK(x.dtype() == dtype, "{}: {} must be {}, got {}", op, operand, dtype_name(dtype),
                 dtype_name(x.dtype()));
}

void check_float(const char* op, const char* operand, const Tensor& x) {
  SEQTRANS_CHECK(x.dtype() == DataType::F32 || x.dtype() == DataType::F16, "{}: {} must be fp32 or fp16, got {}",
                 op, operand, dtype_name(x.dtype()));
  SEQTRANS_CHECK(x.device() == Device::CUDA || x.dtype() == DataType::F32, "{}: the CPU backend computes in fp32 only",
                 op);
}

void check_same_device(const char* op, const Tensor& a, const Tensor& b) {
  SEQTRANS_CHECK(a.device() == b.device(), "{}: operands on different devices ({} and {})", op,
                 device_name(a.device()), device_name(b.device()));
}

void check_like(const char* op, const char* operand, const Tensor& x, const Tensor& reference) {
  SEQTRANS_CHECK(x.device() == reference.device() && x.dtype() == reference.dtype(),
                 "{}: {} is {} on {}, the input is {} on {}", op, operand, dtype_name(x.dtype()),
                 device_name(x.device()), dtype_name(reference.dtype()), device_name(reference.device()));
}

void place_output(Tensor& output, const Shape& shape, DataType dtype, Device device) {
  if (output.defined() && output.shape() == shape && output.dtype() == dtype && output.device() == device) return;
  output = Tensor(shape, dtype, device);
}

void check_extent(const char* op, const char* operand, const Tensor& x, int axis, int64_t expected) {
  SEQTRANS_CHECK(x.dim(axis) == expected, "{}: {} has extent {} on axis {}, expected {} (shape {})", op, operand,
                 x.dim(axis), axis, expected, shape_string(x.shape()));
}

void check_bias_residual(const char* op, const Tensor& x, const Tensor& bias, const Tensor& residual) {
  check_rank(op, "bias", bias, 1);
  check_extent(op, "bias", bias, 0, x.dim(1));
  check_like(op, "bias", bias, x);
  check_like(op, "residual", residual, x);
  SEQTRANS_CHECK(residual.shape() == x.shape(), "{}: residual shape {} differs from x shape {}", op,
                 shape_string(residual.shape()), shape_string(x.shape()));
}

}  // namespace seqtrans::ops
