// Kernel launches that may overlap the kernel before them (programmatic dependent launch, sm_90 on).
//
// In a decoder step of a few rows each kernel streams a few MB of weights, and between two kernels the GPU
// waits for the first to drain, then for the second's blocks to start and for their first loads to come
// back from memory. launch_kernel lets the second kernel start while the first finishes (while
// overlapped_launches(), core/overlapped_launches.h): its blocks load what no kernel of the step writes (a
// product's weights) into registers, then wait_for_inputs() until the kernels before it have finished and
// their writes are visible; release_dependents() then lets the kernel after it do the same. Every kernel
// launched through launch_kernel calls wait_for_inputs() before it reads anything another kernel wrote, and
// writes nothing before it. Off, or before sm_90, launches are ordinary and both calls do nothing.
#pragma once

#include <cuda_runtime.h>

#include <utility>

#include "core/overlapped_launches.h"
#include "cuda/runtime/check.h"
#include "cuda/runtime/context.h"

namespace seqtrans::cuda {

// Waits until the kernels this one depends on have finished and their writes are visible.
__device__ __forceinline__ void wait_for_inputs() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.wait;" ::: "memory");
#endif
}

// Lets the next kernel launched through launch_kernel start (once every block of this one has called it).
__device__ __forceinline__ void release_dependents() {
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900
  asm volatile("griddepcontrol.launch_dependents;" ::: "memory");
#endif
}

// A kernel with nothing to read ahead: waits for its inputs, then lets the next kernel start.
__device__ __forceinline__ void start_after_inputs() {
  wait_for_inputs();
  release_dependents();
}

// kernel<<<grid, block, shared_bytes, stream>>>(args...), overlapping the kernel before it where the mode is
// on and the device has programmatic dependent launch.
template <typename... Parameters, typename... Arguments>
void launch_kernel(void (*kernel)(Parameters...), dim3 grid, dim3 block, size_t shared_bytes, cudaStream_t stream,
                   Arguments&&... args) {
  cudaLaunchAttribute overlap{};
  overlap.id = cudaLaunchAttributeProgrammaticStreamSerialization;
  overlap.val.programmaticStreamSerializationAllowed = 1;
  cudaLaunchConfig_t config{};
  config.gridDim = grid;
  config.blockDim = block;
  config.dynamicSmemBytes = shared_bytes;
  config.stream = stream;
  config.attrs = &overlap;
  config.numAttrs = overlapped_launches() && context().properties.major >= 9 ? 1 : 0;
  CUDA_CHECK(cudaLaunchKernelEx(&config, kernel, std::forward<Arguments>(args)...));
}

}  // namespace seqtrans::cuda
