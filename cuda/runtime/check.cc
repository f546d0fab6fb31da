#include "cuda/runtime/check.h"

namespace seqtrans::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  // Clear the non-sticky error so the next call does not report it again.
  cudaGetLastError();
  throw Error(fmt::format("CUDA error at {}:{}: {} ({}) in {}", file, line, cudaGetErrorString(status),
                          cudaGetErrorName(status), call));
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  throw Error(fmt::format("cuBLAS error at {}:{}: {} ({}) in {}", file, line, cublasGetStatusString(status),
                          cublasGetStatusName(status), call));
}

}  // namespace seqtrans::cuda
