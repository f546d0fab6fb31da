#include "cuda/runtime/context.h"
#include "cuda/runtime/blas_library.h"

#include <map>
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
    CUBLAS_CHECK(blas_library().cublasCreate(&context_.blas));
    CUBLAS_CHECK(blas_library().cublasSetStream(context_.blas, context_.stream));
    // fp16 GEMMs accumulate in fp32 and must not fall back to fp16 split-k reductions.
    CUBLAS_CHECK(blas_library().cublasSetMathMode(context_.blas,
                                   static_cast<cublasMath_t>(CUBLAS_DEFAULT_MATH |
                                                             CUBLAS_MATH_DISALLOW_REDUCED_PRECISION_REDUCTION)));
    CUBLAS_CHECK(blas_library().cublasLtCreate(&context_.blas_lt));
    arena_ = std::make_unique<CachingArena>(options.device_index, options.memory);
    context_.blas_workspace = arena_->allocate(kBlasWorkspaceBytes);
    context_.blas_workspace_bytes = kBlasWorkspaceBytes;
    CUBLAS_CHECK(blas_library().cublasSetWorkspace(context_.blas, context_.blas_workspace, kBlasWorkspaceBytes));
  }

  ~Runtime() {
    // Runs at process exit, when the CUDA runtime may already be unloading: ignore failures.
    set_allocator(Device::CUDA, nullptr);
    cudaSetDevice(context_.device_index);
    if (context_.blas_lt != nullptr) blas_library().cublasLtDestroy(context_.blas_lt);
    if (context_.blas != nullptr) blas_library().cublasDestroy(context_.blas);
    if (context_.stream != nullptr) cudaStreamDestroy(context_.stream);
    arena_.reset();
    cudaGetLastError();
  }

  Runtime(const Runtime&) = delete;
  Runtime& operator=(const Runtime&) = delete;

  const DeviceContext& context() const { return context_; }
  CachingArena& arena() const { return *arena_; }

  // The dynamic shared memory each kernel was allowed on this device (cudaFuncSetAttribute).
  void allow_dynamic_shared_memory(const void* kernel, size_t bytes) const {
    std::lock_guard<std::mutex> lock(attributes_mutex_);
    size_t& allowed = shared_memory_allowed_[kernel];
    if (bytes <= allowed) return;
    CUDA_CHECK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(bytes)));
    allowed = bytes;
  }

 private:
  DeviceContext context_;
  std::unique_ptr<CachingArena> arena_;
  mutable std::mutex attributes_mutex_;
  mutable std::map<const void*, size_t> shared_memory_allowed_;
};

// One runtime per device, created on first use and kept until exit. Each thread computes on the device
// it selected last (one engine per GPU, each on its own thread); a thread that selected none uses the
// only device when there is just one.
std::mutex runtime_mutex;
std::map<int, std::unique_ptr<Runtime>>& runtimes() {
  static std::map<int, std::unique_ptr<Runtime>> by_device;
  return by_device;
}
thread_local const Runtime* thread_runtime = nullptr;

const Runtime& runtime() {
  if (thread_runtime != nullptr) return *thread_runtime;
  std::lock_guard<std::mutex> lock(runtime_mutex);
  const auto& by_device = runtimes();
  SEQTRANS_CHECK(!by_device.empty(), "the CUDA backend is not initialized (call cuda::initialize first)");
  SEQTRANS_CHECK(by_device.size() == 1, "{} CUDA devices are in use and this thread selected none (cuda::use_device)",
                 by_device.size());
  return *by_device.begin()->second;
}

// Makes `runtime` the calling thread's device: CUDA's current device, the context, the allocator.
void make_current(const Runtime& runtime) {
  CUDA_CHECK(cudaSetDevice(runtime.context().device_index));
  thread_runtime = &runtime;
  set_thread_allocator(Device::CUDA, &runtime.arena());
}

}  // namespace

void initialize(const RuntimeOptions& options) {
  preload_blas_library();  // while the device's context is created
  std::unique_lock<std::mutex> lock(runtime_mutex);
  auto& by_device = runtimes();
  auto found = by_device.find(options.device_index);
  if (found == by_device.end()) {
    found = by_device.emplace(options.device_index, std::make_unique<Runtime>(options)).first;
    // Threads that select no device may only fall back on the one device there is.
    set_allocator(Device::CUDA, by_device.size() == 1 ? &found->second->arena() : nullptr);
  }
  const Runtime& selected = *found->second;
  lock.unlock();
  make_current(selected);
}

void use_device(int device_index) {
  std::unique_lock<std::mutex> lock(runtime_mutex);
  const auto& by_device = runtimes();
  const auto found = by_device.find(device_index);
  SEQTRANS_CHECK(found != by_device.end(), "CUDA device {} is not initialized (call cuda::initialize first)",
                 device_index);
  const Runtime& selected = *found->second;
  lock.unlock();
  make_current(selected);
}

bool initialized() {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  return !runtimes().empty();
}

const DeviceContext& context() { return runtime().context(); }

cudaStream_t current_stream() { return runtime().context().stream; }

void synchronize() { CUDA_CHECK(cudaStreamSynchronize(current_stream())); }

size_t available_memory(int device_index) {
  preload_blas_library();  // while the first CUDA call below initializes the device
  int previous = 0;
  CUDA_CHECK(cudaGetDevice(&previous));
  CUDA_CHECK(cudaSetDevice(device_index));
  size_t free_bytes = 0, total_bytes = 0;
  const cudaError_t status = cudaMemGetInfo(&free_bytes, &total_bytes);
  CUDA_CHECK(cudaSetDevice(previous));  // the thread keeps computing where it did
  CUDA_CHECK(status);
  std::lock_guard<std::mutex> lock(runtime_mutex);
  const auto found = runtimes().find(device_index);
  if (found != runtimes().end()) {
    const MemoryStats stats = found->second->arena().stats();
    free_bytes += stats.bytes_reserved - stats.bytes_in_use;
  }
  return free_bytes;
}

MemoryStats memory_stats() { return runtime().arena().stats(); }

MemoryStats total_memory_stats() {
  std::lock_guard<std::mutex> lock(runtime_mutex);
  MemoryStats total;
  for (const auto& [device, device_runtime] : runtimes()) {
    const MemoryStats stats = device_runtime->arena().stats();
    total.cuda_malloc_calls += stats.cuda_malloc_calls;
    total.allocations += stats.allocations;
    total.bytes_reserved += stats.bytes_reserved;
    total.bytes_in_use += stats.bytes_in_use;
    total.peak_bytes_in_use += stats.peak_bytes_in_use;
  }
  return total;
}

CachingArena& arena() { return runtime().arena(); }

void allow_dynamic_shared_memory(const void* kernel, size_t bytes) {
  runtime().allow_dynamic_shared_memory(kernel, bytes);
}

}  // namespace seqtrans::cuda
