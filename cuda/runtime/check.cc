#include "cuda/runtime/check.h"
#include "cuda/runtime/blas_library.h"

namespace seqtrans::cuda {

void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line) {
  // Clear the non-sticky error so the next call does not report it again.
  cudaGetLastError();
  const std::string message = fmt::format("CUDA error at {}:{}: {} ({}) in {}", file, line,
                                          cudaGetErrorString(status), cudaGetErrorName(status), call);
  // Not sticky: the scheduler can retry with fewer sentences.
  if (status == cudaErrorMemoryAllocation) throw OutOfMemoryError(message);
  throw Error(message);
}

void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line) {
  const std::string message = fmt::format("cuBLAS error at {}:{}: {} ({}) in {}", file, line,
                                          blas_library().cublasGetStatusString(status), blas_library().cublasGetStatusName(status), call);
  if (status == CUBLAS_STATUS_ALLOC_FAILED) throw OutOfMemoryError(message);
  throw Error(message);
}

}  // namespace seqtrans::cuda
