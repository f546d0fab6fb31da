// Device work recorded once and replayed with one launch (CUDA graphs): the decoder step's ~100 small
// launches cost one host call instead of ~100. CUDA only; supported() says where it applies.
#pragma once

#include <functional>
#include <memory>

#include "core/device.h"

namespace seqtrans::ops {

class DeviceGraph {
 public:
  // False for the CPU and for a build without CUDA.
  static bool supported(Device device);

  explicit DeviceGraph(Device device);
  ~DeviceGraph();
  DeviceGraph(const DeviceGraph&) = delete;
  DeviceGraph& operator=(const DeviceGraph&) = delete;

  // Records the ops `record` runs, without running them. Tensors created inside stay reserved for the
  // graph (replays write to the same addresses); `record` must not copy to or from the host.
  void capture(const std::function<void()>& record);
  // Runs the recorded ops again, on the inputs' current contents.
  void replay();

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace seqtrans::ops
