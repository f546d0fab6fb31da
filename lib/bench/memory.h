// Peak memory of this process, as `seqtrans bench` reports it.
#pragma once

#include <cstdint>

#include "core/device.h"

namespace seqtrans::bench {

struct PeakMemory {
  int64_t peak_bytes = 0;      // GPU: the caching allocator's peak of bytes in tensors; CPU: peak RSS
  int64_t reserved_bytes = 0;  // GPU: bytes the allocator holds from the driver; CPU: 0
  const char* what = "";       // how peak_bytes was measured, for the report
};

// The peak so far (it never goes down within a process). GPU counters come from ops::device_memory, the
// only place that reads the CUDA runtime's allocator; the CUDA context itself is not included.
PeakMemory peak_memory(Device device);

}  // namespace seqtrans::bench
