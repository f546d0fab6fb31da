// GPU test cases carry the [gpu] tag and skip cleanly where no GPU is present (CI has none).
#pragma once

#include "core/device.h"
#include "ops/runtime.h"

namespace seqtrans::testing {

// True once the device is ready; false on a machine without a GPU or a build without CUDA.
inline bool gpu_available() {
  static const bool ready = [] {
    if (cuda_device_count() == 0) return false;
    ops::initialize_device(Device::CUDA, 0, 0);
    return true;
  }();
  return ready;
}

}  // namespace seqtrans::testing

#if SEQTRANS_CATCH_VERSION == 3
#define REQUIRE_GPU_OR_SKIP()                                           \
  do {                                                                  \
    if (!seqtrans::testing::gpu_available()) SKIP("no GPU on this machine"); \
  } while (false)
#else
#define REQUIRE_GPU_OR_SKIP()                           \
  do {                                                  \
    if (!seqtrans::testing::gpu_available()) {          \
      WARN("no GPU on this machine: GPU test skipped"); \
      return;                                           \
    }                                                   \
  } while (false)
#endif
