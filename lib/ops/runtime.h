// Starting the compute device and reading its memory counters: the device-level counterpart of the
// op front ends (one switch, CUDA behind SEQTRANS_WITH_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace seqtrans::ops {

// Prepares the device and selects it for the calling thread (stream, BLAS handles, memory arena with `reserve_bytes` taken up
// front so that translation itself allocates nothing). A no-op for the CPU.
// limit_bytes caps the device memory its tensors may take (0 = none); the first initialization of a
// device sets it.
void initialize_device(Device device, int device_index, size_t reserve_bytes, size_t limit_bytes = 0);

// Bytes a new working set could take on the device: what it has free plus what the arena holds unused;
// for the CPU, available_host_memory().
size_t available_device_memory(Device device, int device_index);

// Host memory a new working set could take: the kernel's MemAvailable (free memory and caches it can drop),
// else the free pages; SIZE_MAX where neither can be read.
size_t available_host_memory();

// Makes an initialized device the calling thread's: with several GPUs each engine computes on its own
// thread, and every op of that thread then runs on its device. A no-op for the CPU.
void select_device(Device device, int device_index);

// Whether set_cpu_threads can choose the CPU backend's thread count: always, since the CPU ops run on the
// backend's own pool (lib/cpu/thread_pool.h) with the BLAS library single-threaded inside it.
bool cpu_threads_settable();
// Threads for the CPU backend's ops (threads >= 1), the calling thread included.
void set_cpu_threads(int threads);
// Starts the CPU backend's pool (with its default threads unless set) now rather than at the first op:
// the start ends the BLAS library's own threads, which poll a core until then (cpu/thread_pool.cc).
void start_cpu_threads();

struct DeviceMemory {
  int64_t reservations = 0;   // device allocations made (cudaMalloc calls)
  size_t bytes_reserved = 0;
  size_t peak_bytes_in_use = 0;
};
// Added up over the GPUs in use (one engine per GPU: peaks added too); zeros for the CPU or before
// initialization.
DeviceMemory device_memory(Device device);

}  // namespace seqtrans::ops
