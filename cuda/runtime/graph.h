// CUDA graphs: a sequence of launches recorded once and replayed with one call, which removes the
// per-launch host cost that dominates a small decoder step (about 100 launches).
#pragma once

#include <cuda_runtime_api.h>

#include <functional>

namespace seqtrans::cuda {

class CachingArena;

class Graph {
 public:
  Graph();
  ~Graph();
  Graph(const Graph&) = delete;
  Graph& operator=(const Graph&) = delete;

  // Records what `record` queues on the current stream, without running it. Tensors `record` allocates
  // come from this graph's private memory pool, so replays can reuse their addresses; `record` must not
  // synchronize or copy between host and device.
  void capture(const std::function<void()>& record);
  // Queues the recorded work on the current stream.
  void replay();
  bool captured() const { return exec_ != nullptr; }

 private:
  CachingArena* arena_;  // the device's arena when the graph was made (runtimes live until exit)
  int pool_ = 0;
  cudaGraphExec_t exec_ = nullptr;
};

}  // namespace seqtrans::cuda
