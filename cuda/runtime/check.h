// Error checks for every CUDA runtime and cuBLAS call: a failure throws seqtrans::Error naming the call,
// the file:line and the library's error string.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "core/error.h"

namespace seqtrans::cuda {

[[noreturn]] void throw_cuda_error(cudaError_t status, const char* call, const char* file, int line);
[[noreturn]] void throw_cublas_error(cublasStatus_t status, const char* call, const char* file, int line);

}  // namespace seqtrans::cuda

#define CUDA_CHECK(call)                                                                \
  do {                                                                                  \
    const cudaError_t cuda_status_ = (call);                                            \
    if (cuda_status_ != cudaSuccess)                                                    \
      ::seqtrans::cuda::throw_cuda_error(cuda_status_, #call, __FILE__, __LINE__);      \
  } while (false)

#define CUBLAS_CHECK(call)                                                              \
  do {                                                                                  \
    const cublasStatus_t cublas_status_ = (call);                                       \
    if (cublas_status_ != CUBLAS_STATUS_SUCCESS)                                        \
      ::seqtrans::cuda::throw_cublas_error(cublas_status_, #call, __FILE__, __LINE__);  \
  } while (false)

// After every kernel launch: a bad configuration (grid, shared memory) surfaces here, at the launch.
#define CUDA_CHECK_LAUNCH() CUDA_CHECK(cudaGetLastError())
