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
  // No driver or no GPU is not an error here: it means "run on the CPU". Asked once per process.
  static const int count = [] {
    int found = 0;
    if (cudaGetDeviceCount(&found) != cudaSuccess) {
      cudaGetLastError();
      return 0;
    }
    return found;
  }();
  return count;
}

void synchronize_devices() {
  if (cuda_device_count() > 0) cudaDeviceSynchronize();
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

void synchronize_devices() {}

void copy_bytes(Device destination_device, void* destination, Device source_device, const void* source,
                size_t bytes) {
  SEQTRANS_CHECK(destination_device == Device::CPU && source_device == Device::CPU,
                 "this build of seqtrans has no CUDA support");
  if (bytes != 0) std::memcpy(destination, source, bytes);
}

#endif

}  // namespace seqtrans
