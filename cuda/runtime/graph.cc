#include "cuda/runtime/graph.h"

#include "cuda/runtime/check.h"
#include "cuda/runtime/context.h"

namespace seqtrans::cuda {

Graph::Graph() : arena_(&arena()), pool_(arena_->create_pool()) {}

Graph::~Graph() {
  // Destructors must not throw; a failure here can only come from a runtime already shutting down. The
  // graph's own arena, not the calling thread's device: with several GPUs an engine may be destroyed on a
  // thread that selected none.
  if (exec_ != nullptr) cudaGraphExecDestroy(exec_);
  if (initialized()) arena_->release_pool(pool_);
  cudaGetLastError();
}

void Graph::capture(const std::function<void()>& record) {
  SEQTRANS_CHECK(exec_ == nullptr, "a CUDA graph is captured once");
  const cudaStream_t stream = current_stream();
  CachingArena& memory = *arena_;
  const int previous_pool = memory.activate_pool(pool_);
  // Relaxed: the arena may still reserve memory (cudaMalloc) while the step is being recorded.
  CUDA_CHECK(cudaStreamBeginCapture(stream, cudaStreamCaptureModeRelaxed));
  cudaGraph_t graph = nullptr;
  try {
    record();
  } catch (...) {
    cudaStreamEndCapture(stream, &graph);
    if (graph != nullptr) cudaGraphDestroy(graph);
    cudaGetLastError();
    memory.activate_pool(previous_pool);
    throw;
  }
  memory.activate_pool(previous_pool);
  CUDA_CHECK(cudaStreamEndCapture(stream, &graph));
  const cudaError_t status = cudaGraphInstantiate(&exec_, graph, 0);
  cudaGraphDestroy(graph);
  CUDA_CHECK(status);
}

void Graph::replay() {
  SEQTRANS_CHECK(exec_ != nullptr, "replay of a CUDA graph that was never captured");
  CUDA_CHECK(cudaGraphLaunch(exec_, current_stream()));
}

}  // namespace seqtrans::cuda
