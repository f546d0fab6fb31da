// Where a tensor lives and where an op runs.
#pragma once

#include <string>

namespace seqtrans {

enum class Device { CPU, CUDA };

inline const char* device_name(Device device) { return device == Device::CPU ? "cpu" : "cuda"; }

// True when this build contains the CUDA backend (it may still find no GPU at run time).
bool cuda_compiled();

// Number of usable CUDA devices; 0 in a CPU-only build or on a machine without a GPU.
int cuda_device_count();

// Waits for all queued GPU work (no-op without CUDA); used by profiling scopes.
void synchronize_devices();

}  // namespace seqtrans
