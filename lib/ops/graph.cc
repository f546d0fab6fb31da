#include "ops/graph.h"

#include "core/error.h"

#ifdef SEQTRANS_WITH_CUDA
#include "cuda/runtime/graph.h"
#endif

namespace seqtrans::ops {

#ifdef SEQTRANS_WITH_CUDA

struct DeviceGraph::Impl {
  cuda::Graph graph;
};

bool DeviceGraph::supported(Device device) { return device == Device::CUDA; }

DeviceGraph::DeviceGraph(Device device) {
  SEQTRANS_CHECK(supported(device), "device graphs need a CUDA device, not {}", device_name(device));
  impl_ = std::make_unique<Impl>();
}

void DeviceGraph::capture(const std::function<void()>& record) { impl_->graph.capture(record); }

void DeviceGraph::replay() { impl_->graph.replay(); }

#else

struct DeviceGraph::Impl {};

bool DeviceGraph::supported(Device) { return false; }

DeviceGraph::DeviceGraph(Device device) {
  throw Error(fmt::format("device graphs need a CUDA build (device {})", device_name(device)));
}

void DeviceGraph::capture(const std::function<void()>&) {}

void DeviceGraph::replay() {}

#endif

DeviceGraph::~DeviceGraph() = default;

}  // namespace seqtrans::ops
