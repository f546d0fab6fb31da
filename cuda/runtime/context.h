// The CUDA device this process computes on: its stream, cuBLAS handles, properties and memory arena.
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>
#include <cuda_runtime_api.h>

#include "cuda/runtime/arena.h"

namespace seqtrans::cuda {

struct RuntimeOptions {
  int device_index = 0;
  ArenaOptions memory;
};

// What kernels and launchers need from the device; read from the device at initialization.
struct DeviceContext {
  int device_index = 0;
  cudaStream_t stream = nullptr;
  cublasHandle_t blas = nullptr;
  cublasLtHandle_t blas_lt = nullptr;
  void* blas_workspace = nullptr;  // shared by cuBLAS and cuBLASLt: both run on the one stream
  size_t blas_workspace_bytes = 0;
  cudaDeviceProp properties{};
};

// Selects the device, creates the stream and the cuBLAS handles and installs the caching allocator for
// Device::CUDA tensors. A second call with the same device does nothing; another device is an error.
void initialize(const RuntimeOptions& options = {});
bool initialized();

// The context of the initialized device; throws if initialize() has not run.
const DeviceContext& context();

// The stream every op runs on. It is a blocking stream, so it stays ordered with the synchronous
// cudaMemcpy of host <-> device copies (lib/core/device.cc), which run on the legacy default stream.
cudaStream_t current_stream();

// Waits for all work queued on the current stream; throws if any of it failed.
void synchronize();

// Counters of the caching allocator (cudaMalloc calls, bytes in use, peak).
// Bytes the device has free now (cudaMemGetInfo), asked before or after initialization.
size_t free_device_memory(int device_index);
MemoryStats memory_stats();

// The caching allocator itself (private pools for CUDA graphs).
CachingArena& arena();

}  // namespace seqtrans::cuda
