#include "cuda/runtime/gemm.h"

#include <climits>

#include "cuda/runtime/check.h"
#include "cuda/runtime/context.h"

namespace seqtrans::cuda {

void gemm_row_major(const GemmProblem& p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0) return;
  SEQTRANS_CHECK(p.m <= INT_MAX && p.n <= INT_MAX && p.k <= INT_MAX, "matmul: extents {}x{}x{} exceed cuBLAS's int",
                 p.m, p.n, p.k);
  SEQTRANS_CHECK(p.dtype == DataType::F32 || p.dtype == DataType::F16, "matmul: no CUDA GEMM for {}",
                 dtype_name(p.dtype));
  const cublasHandle_t handle = context().blas;
  CUBLAS_CHECK(cublasSetStream(handle, stream));
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  // Row-major c[m, n] is column-major c^T[n, m] = b'[n, k] x a'[k, m], where a' is row-major a read as
  // column-major ([k, m], ld k) and b' is b read as column-major: [k, n] (ld k) transposed when b is
  // row-major [n, k], or [n, k] (ld n) as is when b is row-major [k, n].
  const bool transpose_b = p.transpose_b == TransposeB::Yes;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld_b = transpose_b ? k : n;
  const cudaDataType_t type = p.dtype == DataType::F16 ? CUDA_R_16F : CUDA_R_32F;
  // Pedantic fp32 keeps fp32 results within ~1e-5 of the CPU; fp16 inputs use Tensor Cores.
  const cublasComputeType_t compute = p.dtype == DataType::F16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
  const float beta = 0.0f;
  if (k == 0) {
    CUDA_CHECK(cudaMemsetAsync(p.c, 0, static_cast<size_t>(p.m) * p.n * dtype_size(p.output_dtype), stream));
    return;
  }
  const cudaDataType_t output_type = p.output_dtype == DataType::F16 ? CUDA_R_16F : CUDA_R_32F;
  CUBLAS_CHECK(cublasGemmEx(handle, op_b, CUBLAS_OP_N, n, m, k, &p.alpha, p.b, type, ld_b, p.a, type, k, &beta, p.c,
                            output_type, n, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace seqtrans::cuda
