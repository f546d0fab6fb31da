// The one device switch of every op: CPU calls go to lib/cpu, CUDA calls to cuda/kernels on the
// current stream. A build without CUDA turns the CUDA case into a clear error.
#pragma once

#include "core/error.h"
#include "cpu/cpu_ops.h"
#include "ops/ops.h"  // the front ends each op file defines

#ifdef SEQTRANS_WITH_CUDA
#include "cuda/kernels/cuda_ops.h"
#include "cuda/runtime/context.h"
#define SEQTRANS_ON_CUDA(op_name, ...) ::seqtrans::cuda::op_name(__VA_ARGS__, ::seqtrans::cuda::current_stream())
#else
#define SEQTRANS_ON_CUDA(op_name, ...) \
  throw ::seqtrans::Error("op " #op_name ": this build of seqtrans has no CUDA support")
#endif

namespace seqtrans::ops {

// Shape checks shared by the front ends; each throws one line naming the op and the operand.
void check_rank(const char* op, const char* operand, const Tensor& x, int rank);
void check_dtype(const char* op, const char* operand, const Tensor& x, DataType dtype);
void check_float(const char* op, const char* operand, const Tensor& x);
void check_same_device(const char* op, const Tensor& a, const Tensor& b);
// `x` has `reference`'s device and dtype: an op's weights (bias, gamma, beta, tables) share its input's.
void check_like(const char* op, const char* operand, const Tensor& x, const Tensor& reference);
void check_extent(const char* op, const char* operand, const Tensor& x, int axis, int64_t expected);
// A residual block end's operands: bias [x.dim(1)] and residual (x's shape) with x's dtype and device.
void check_bias_residual(const char* op, const Tensor& x, const Tensor& bias, const Tensor& residual);
// An op's output: kept where the caller placed it (same shape, dtype and device), else made.
void place_output(Tensor& output, const Shape& shape, DataType dtype, Device device);

}  // namespace seqtrans::ops
