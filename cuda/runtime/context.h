// The CUDA devices this process computes on: each one's stream, cuBLAS handles, properties and memory
// arena. Each thread computes on the device it selected last (one engine per GPU, each on its thread).
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

// Prepares the device once (stream, cuBLAS handles, caching allocator for Device::CUDA tensors) and makes
// it the calling thread's device. A later call for a device already prepared only selects it (its memory
// options are those of the first call).
void initialize(const RuntimeOptions& options = {});
// Makes a prepared device the calling thread's; throws if initialize() has not run for it.
void use_device(int device_index);
// True once any device is prepared.
bool initialized();

// The context of the calling thread's device (the only device when this thread selected none and just
// one is prepared); throws if there is none.
const DeviceContext& context();

// The stream every op of this thread's device runs on. It is a blocking stream, so it stays ordered with the synchronous
// cudaMemcpy of host <-> device copies (lib/core/device.cc), which run on the legacy default stream.
cudaStream_t current_stream();

// Waits for all work queued on the current stream; throws if any of it failed.
void synchronize();

// Counters of the caching allocator (cudaMalloc calls, bytes in use, peak) of this thread's device.
// Bytes a new working set could take on the device: what it has free (cudaMemGetInfo) plus what its arena
// holds unused, asked before or after initialization.
size_t available_memory(int device_index);
MemoryStats memory_stats();
// The same added up over every prepared device (peaks too: a bound on the peak of the total).
MemoryStats total_memory_stats();

// The caching allocator itself (private pools for CUDA graphs).
CachingArena& arena();

// Lets `kernel` launch with up to `bytes` of dynamic shared memory on the calling thread's device. A function
// attribute belongs to one device, so each device gets its own call (the first launch on a second GPU used to
// fail with cudaErrorCooperativeLaunchTooLarge); later calls for a kernel already raised that far return at once.
void allow_dynamic_shared_memory(const void* kernel, size_t bytes);

}  // namespace seqtrans::cuda
