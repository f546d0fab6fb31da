// Starting the compute device and reading its memory counters: the device-level counterpart of the
// op front ends (one switch, CUDA behind SEQTRANS_WITH_CUDA).
#pragma once

#include <cstddef>
#include <cstdint>

#include "core/device.h"

namespace seqtrans::ops {

// Prepares the device and selects it for the calling thread (stream, BLAS handles, memory arena with `reserve_bytes` taken up
// front so that translation itself allocates nothing). A no-op for the CPU.
void initialize_device(Device device, int device_index, size_t reserve_bytes);

// Makes an initialized device the calling thread's: with several GPUs each engine computes on its own
// thread, and every op of that thread then runs on its device. A no-op for the CPU.
void select_device(Device device, int device_index);

struct DeviceMemory {
  int64_t reservations = 0;   // device allocations made (cudaMalloc calls)
  size_t bytes_reserved = 0;
  size_t peak_bytes_in_use = 0;
};
// Added up over the GPUs in use (one engine per GPU: peaks added too); zeros for the CPU or before
// initialization.
DeviceMemory device_memory(Device device);

}  // namespace seqtrans::ops
