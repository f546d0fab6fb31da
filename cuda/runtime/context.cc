#include "cuda/runtime/context.h"

#include <memory>
#include <mutex>

#include "cuda/runtime/check.h"

namespace seqtrans::cuda {
namespace {

// cuBLAS picks its own scratch memory through cudaMalloc unless given some: take it from the arena once.
constexpr size_t kBlasWorkspaceBytes = size_t{32} << 20;

// Owns everything initialize() creates; lives until process exit, after every CUDA tensor.
class Runtime {
 public:
  explicit Runtime(const RuntimeOptions& options) {
    int count = 0;
    CUDA_CHECK(cudaGetDeviceCount(&count));
    SEQTRANS_CHECK(options.device_index >= 0 && options.device_index < count,
                   "CUDA device {} requested, but this machine has {} CUDA device(s)", options.device_index, count);
    context_.device_index = options.device_index;
    CUDA_CHECK(cudaSetDevice(options.device_index));
    CUDA_CHECK(cudaGetDeviceProperties(&context_.properties, options.device_index));
    CUDA_CHECK(cudaStreamCreate(&context_.stream));
    CUBLAS_CHECK(cublasCreate(&context_.blas));
    CUBLAS_CHECK(cublasSetStream(context_.blas, context_.stream));
    // fp16 GEMMs accumulate in fp32 and must not fall back to fp16 split-k reductions.
    CUBLAS_CHECK(cublasSetMathMode(context_.blas,
                                   static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    CUBLAS_CHECK(cublasLtCreate(&context_.blas_lt));
    arena_ = std::make_unique<CachingArena>(options.device_index, options.memory);
    context_.blas_workspace = arena_->allocate(kBlasWorkspaceBytes);
    context_.blas_workspace_bytes = kBlasWorkspaceBytes;
    CUBLAS_CHECK(cublasSetWorkspace(context_.blas, context_.blas_workspace, kBlasWorkspaceBytes));
    set_allocator(Device::CUDA, arena_.get());
  }

  ~Runtime() {
    // Runs at process exit, when the CUDA runtime may already be unloading: ignore failures.
    set_allocator(Device::CUDA, nullptr);
    if (context_.blas_lt != nullptr) cublasLtDestroy(context_.blas_lt);
    if (context_.blas != nullptr) cublasDestroy(context_.blas);
    if (context_.stream != nullptr) cudaStreamDestroy(context_.stream);
    arena_.reset();
    cudaGetLastError();
  }

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const DeviceContext& context() const { return context_; }
  CachingArena& arena() const { return *arena_; }

 private:
  DeviceContext context_;
  std::unique_ptr<CachingArena> arena_;
};

std::mutex runtime_mutex;

std::unique_ptr<Runtime>& runtime_slot() {
  static std::unique_ptr<Runtime> runtime;
  return runtime;
}

const Runtime& runtime() {
  const std::unique_ptr<Runtime>& slot = runtime_slot();
  SEQTRANS_CHECK(slot != nullptr, "the CUDA backend is not initialized (call cuda::initialize first)");
  return *slot;
}

}  // namespace

void initialize(const RuntimeOptions& options) {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  std::unique_ptr<Runtime>& slot = runtime_slot();
  if (slot != nullptr) {
    SEQTRANS_CHECK(slot->context().device_index == options.device_index,
                   "the CUDA backend is already initialized on device {}, cannot switch to device {}",
                   slot->context().device_index, options.device_index);
    return;
  }
  slot = std::make_unique<Runtime>(options);
}

bool initialized() { return runtime_slot() != nullptr; }

const DeviceContext& context() { return runtime().context(); }

cudaStream_t current_stream() { return runtime().context().stream; }

void synchronize() { CUDA_CHECK(cudaStreamSynchronize(current_stream())); }

size_t free_device_memory(int device_index) {
  CUDA_CHECK(cudaSetDevice(device_index));
  size_t free_bytes = 0, total_bytes = 0;
  CUDA_CHECK(cudaMemGetInfo(&free_bytes, &total_bytes));
  return free_bytes;
}

MemoryStats memory_stats() { return runtime().arena().stats(); }

CachingArena& arena() { return runtime().arena(); }

}  // namespace seqtrans::cuda
