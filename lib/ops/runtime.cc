#include "ops/runtime.h"

#include <cstdlib>
#include <cstring>
#include <limits>
#include <new>

#ifdef SEQTRANS_WITH_CUDA
#include "cuda/runtime/check.h"
#include "cuda/runtime/context.h"
#endif

#include "core/error.h"

#ifdef SEQTRANS_BLAS_THREADS
// The library's own setter, found by CMake (its header may not be the cblas.h we include).
extern "C" void SEQTRANS_BLAS_THREADS(int threads);
#endif

namespace seqtrans::ops {

HostBuffer::~HostBuffer() { release(); }

void HostBuffer::release() {
#ifdef SEQTRANS_WITH_CUDA
  if (pinned_) cudaFreeHost(data_);
#endif
  if (!pinned_) std::free(data_);
  data_ = nullptr;
  bytes_ = 0;
  pinned_ = false;
}

void HostBuffer::reserve(size_t bytes) {
  if (bytes <= bytes_) return;
  release();
#ifdef SEQTRANS_WITH_CUDA
  if (cuda::initialized()) {
    if (cudaMallocHost(&data_, bytes) == cudaSuccess) {
      pinned_ = true;
      bytes_ = bytes;
      return;
    }
    cudaGetLastError();  // no page-locked memory left: plain memory works, the copies stage through the driver
  }
#endif
  data_ = std::malloc(bytes);
  if (data_ == nullptr) throw std::bad_alloc();
  bytes_ = bytes;
}

void copy_to_device_async(const HostBuffer& host, Tensor& dst) {
  if (dst.bytes() == 0) return;
  if (dst.device() == Device::CPU) {
    std::memcpy(dst.raw(), host.data<void>(), dst.bytes());
    return;
  }
#ifdef SEQTRANS_WITH_CUDA
  CUDA_CHECK(cudaMemcpyAsync(dst.raw(), host.data<void>(), dst.bytes(), cudaMemcpyHostToDevice, cuda::current_stream()));
#endif
}

void copy_to_host_async(const Tensor& src, HostBuffer& host) {
  if (src.bytes() == 0) return;
  if (src.device() == Device::CPU) {
    std::memcpy(host.data<void>(), src.raw(), src.bytes());
    return;
  }
#ifdef SEQTRANS_WITH_CUDA
  CUDA_CHECK(cudaMemcpyAsync(host.data<void>(), src.raw(), src.bytes(), cudaMemcpyDeviceToHost, cuda::current_stream()));
#endif
}

void synchronize_device(Device device) {
  if (device == Device::CPU) return;
#ifdef SEQTRANS_WITH_CUDA
  cuda::synchronize();
#endif
}

bool cpu_threads_settable() {
#ifdef SEQTRANS_BLAS_THREADS
  return true;
#else
  return false;
#endif
}

void set_cpu_threads(int threads) {
  SEQTRANS_CHECK(threads >= 1, "CPU threads must be at least 1, got {}", threads);
#ifdef SEQTRANS_BLAS_THREADS
  SEQTRANS_BLAS_THREADS(threads);
#endif
}

void initialize_device(Device device, int device_index, size_t reserve_bytes, size_t limit_bytes) {
  if (device == Device::CPU) return;
#ifdef SEQTRANS_WITH_CUDA
  cuda::RuntimeOptions options;
  options.device_index = device_index;
  options.memory.initial_bytes = reserve_bytes;
  options.memory.limit_bytes = limit_bytes;
  cuda::initialize(options);
#else
  (void)device_index;
  (void)reserve_bytes;
  (void)limit_bytes;
  throw Error("this build of seqtrans has no CUDA support");
#endif
}

size_t available_device_memory(Device device, int device_index) {
  if (device == Device::CPU) return std::numeric_limits<size_t>::max();
#ifdef SEQTRANS_WITH_CUDA
  return cuda::available_memory(device_index);
#else
  (void)device_index;
  throw Error("this build of seqtrans has no CUDA support");
#endif
}

void select_device(Device device, int device_index) {
  if (device == Device::CPU) return;
#ifdef SEQTRANS_WITH_CUDA
  cuda::use_device(device_index);
#else
  (void)device_index;
  throw Error("this build of seqtrans has no CUDA support");
#endif
}

DeviceMemory device_memory(Device device) {
  DeviceMemory memory;
#ifdef SEQTRANS_WITH_CUDA
  if (device == Device::CUDA && cuda::initialized()) {
    const cuda::MemoryStats stats = cuda::total_memory_stats();
    memory.reservations = stats.cuda_malloc_calls;
    memory.bytes_reserved = stats.bytes_reserved;
    memory.peak_bytes_in_use = stats.peak_bytes_in_use;
  }
#else
  (void)device;
#endif
  return memory;
}

}  // namespace seqtrans::ops
