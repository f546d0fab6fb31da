#include "core/device.h"

#include <cstring>

#include "core/device_copy.h"
#include "core/error.h"

#ifdef SEQTRANS_WITH_CUDA
#include <cuda_runtime.h>
#endif

namespace seqtrans {

#ifdef SEQTRANS_WITH_CUDA

bool cuda_compiled() { return true; }

int cuda_device_count() {
  int count = 0;
  // No driver or no GPU is not an error here: it means "run on the CPU".
  if (cudaGetDeviceCount(&count) != cudaSuccess) {
    cudaGetLastError();
    return 0;
  }
  return count;
}

void copy_bytes(Device destination_device, void* destination, Device source_device, const void* source,
                size_t bytes) {
  if (bytes == 0) return;
  if (destination_device == Device::CPU && source_device == Device::CPU) {
    std::memcpy(destination, source, bytes);
    return;
  }
  const cudaError_t status = cudaMemcpy(destination, source, bytes, cudaMemcpyDefault);
  SEQTRANS_CHECK(status == cudaSuccess, "CUDA copy of {} bytes failed: {}", bytes, cudaGetErrorString(status));
}

#else

bool cuda_compiled() { return false; }

int cuda_device_count() { return 0; }

void copy_bytes(Device destination_device, void* destination, Device source_device, const void* source,
                size_t bytes) {
  SEQTRANS_CHECK(destination_device == Device::CPU && source_device == Device::CPU,
                 "this build of seqtrans has no CUDA support");
  if (bytes != 0) std::memcpy(destination, source, bytes);
}

#endif

}  // namespace seqtrans
