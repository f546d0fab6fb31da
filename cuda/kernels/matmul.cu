// matmul: one cuBLAS GEMM through the row-major wrapper in cuda/runtime/gemm.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/runtime/gemm.h"

namespace seqtrans::cuda {

void matmul(const Tensor& a, const Tensor& b, Tensor& c, const ops::MatmulOptions& options, cudaStream_t stream) {
  check_on_device("matmul", "a", a);
  check_on_device("matmul", "b", b);
  check_same_dtype("matmul", "c", c, options.fp32_output ? DataType::F32 : a.dtype());
  GemmProblem problem;
  problem.a = a.raw();
  problem.b = b.raw();
  problem.c = c.raw();
  problem.dtype = a.dtype();
  problem.output_dtype = c.dtype();
  problem.m = a.dim(0);
  problem.k = a.dim(1);
  problem.n = c.dim(1);
  problem.transpose_b = options.transpose_b ? TransposeB::Yes : TransposeB::No;
  problem.alpha = options.alpha;
  if (options.bias == nullptr) {
    gemm_row_major(problem, stream);
    return;
  }
  const bool relu = options.activation == Activation::Relu;
  const bool fusable = !options.activation || relu;
  if (fusable && gemm_row_major_with_bias(problem, options.bias->raw(), relu ? GemmEpilogue::ReluBias : GemmEpilogue::Bias,
                                          stream))
    return;
  gemm_row_major(problem, stream);
  if (options.activation)
    bias_activation(c, *options.bias, *options.activation, stream);
  else
    add_bias(c, *options.bias, stream);
}

}  // namespace seqtrans::cuda
