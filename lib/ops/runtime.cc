#include "ops/runtime.h"

#include <unistd.h>

#include <fstream>
#include <limits>
#include <string>

#ifdef SEQTRANS_WITH_CUDA
#include "cuda/runtime/context.h"
#endif

#include "core/error.h"
#include "cpu/thread_pool.h"

namespace seqtrans::ops {

bool cpu_threads_settable() { return true; }

void set_cpu_threads(int threads) { cpu::set_threads(threads); }

void start_cpu_threads() { cpu::threads(); }

size_t available_host_memory() {
  std::ifstream meminfo("/proc/meminfo");
  std::string key;
  size_t kibibytes = 0;
  std::string unit;
  while (meminfo >> key >> kibibytes >> unit)
    if (key == "MemAvailable:") return kibibytes * 1024;
  const long pages = sysconf(_SC_AVPHYS_PAGES), page_size = sysconf(_SC_PAGESIZE);
  if (pages > 0 && page_size > 0) return static_cast<size_t>(pages) * static_cast<size_t>(page_size);
  return std::numeric_limits<size_t>::max();
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
  if (device == Device::CPU) return available_host_memory();
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
