#include "core/allocator.h"

#include <cstdlib>
#include <new>

#include "core/error.h"

namespace seqtrans {
namespace {

// 64-byte aligned host memory: matches cache lines and the widest SIMD loads.
class HostAllocator : public Allocator {
 public:
  void* allocate(size_t bytes) override {
    const size_t rounded = (bytes + 63) / 64 * 64;
    void* pointer = std::aligned_alloc(64, rounded == 0 ? 64 : rounded);
    if (pointer == nullptr) throw Error(fmt::format("out of host memory allocating {} bytes", bytes));
    return pointer;
  }
  void deallocate(void* pointer, size_t) override { std::free(pointer); }
};

HostAllocator host_allocator;
Allocator* cuda_allocator = nullptr;
thread_local Allocator* thread_cuda_allocator = nullptr;
thread_local Allocator* thread_host_allocator = nullptr;  // a HostArenaScope's arena

}  // namespace

Allocator& allocator_for(Device device) {
  if (device == Device::CPU) return thread_host_allocator != nullptr ? *thread_host_allocator : host_allocator;
  Allocator* allocator = thread_cuda_allocator != nullptr ? thread_cuda_allocator : cuda_allocator;
  SEQTRANS_CHECK(allocator != nullptr,
                 "no CUDA allocator for this thread (CUDA backend not initialized, or several GPUs and none "
                 "selected on this thread)");
  return *allocator;
}

Allocator* set_allocator(Device device, Allocator* allocator) {
  SEQTRANS_CHECK(device == Device::CUDA, "the host allocator cannot be replaced");
  Allocator* previous = cuda_allocator;
  cuda_allocator = allocator;
  return previous;
}

Allocator* set_thread_allocator(Device device, Allocator* allocator) {
  Allocator*& slot = device == Device::CPU ? thread_host_allocator : thread_cuda_allocator;
  Allocator* previous = slot;
  slot = allocator;
  return previous;
}

}  // namespace seqtrans
