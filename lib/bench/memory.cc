#include "bench/memory.h"

#include <sys/resource.h>

#include "ops/runtime.h"

namespace seqtrans::bench {

PeakMemory peak_memory(Device device) {
  PeakMemory memory;
  if (device == Device::CUDA) {
    const ops::DeviceMemory counters = ops::device_memory(device);
    memory.peak_bytes = static_cast<int64_t>(counters.peak_bytes_in_use);
    memory.reserved_bytes = static_cast<int64_t>(counters.bytes_reserved);
    memory.what = "GPU tensors (allocator peak)";
    return memory;
  }
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  memory.peak_bytes = static_cast<int64_t>(usage.ru_maxrss) * 1024;  // Linux reports kilobytes
  memory.what = "process peak RSS";
  return memory;
}

}  // namespace seqtrans::bench
