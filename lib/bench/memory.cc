#include "bench/memory.h"

#include <sys/resource.h>

#include <fstream>
#include <string>

#include "ops/runtime.h"

namespace seqtrans::bench {
namespace {

// VmHWM of /proc/self/status: this process image's peak resident set. getrusage's ru_maxrss is only
// the fallback, because Linux carries it over fork and exec, so a child of a large parent (a Python
// script with torch loaded) would report the parent's peak.
int64_t peak_resident_bytes() {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line))
    if (line.rfind("VmHWM:", 0) == 0) return std::stoll(line.substr(6)) * 1024;  // "VmHWM:   1234 kB"
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<int64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
}

}  // namespace

PeakMemory peak_memory(Device device) {
  PeakMemory memory;
  if (device == Device::CUDA) {
    const ops::DeviceMemory counters = ops::device_memory(device);
    memory.peak_bytes = static_cast<int64_t>(counters.peak_bytes_in_use);
    memory.reserved_bytes = static_cast<int64_t>(counters.bytes_reserved);
    memory.what = "GPU tensors (allocator peak)";
    return memory;
  }
  memory.peak_bytes = peak_resident_bytes();
  memory.what = "process peak RSS";
  return memory;
}

}  // namespace seqtrans::bench
