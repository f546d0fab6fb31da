// Byte copies between host and device memory; the only place core touches the CUDA runtime.
#pragma once

#include <cstddef>

#include "core/device.h"

namespace seqtrans {

// Synchronous copy of `bytes` bytes; either side may be CPU or CUDA memory.
void copy_bytes(Device destination_device, void* destination, Device source_device, const void* source,
                size_t bytes);

}  // namespace seqtrans
