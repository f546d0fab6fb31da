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

}  // namespace

Allocator& allocator_for(Device device) {
  if (device == Device::CPU) return host_allocator;
  SEQTRANS_CHECK(cuda_allocator != nullptr, "no CUDA allocator installed (CUDA backend not initialized)");
  return *cuda_allocator;
}

Allocator* set_allocator(Device device, Allocator* allocator) {
  SEQTRANS_CHECK(device == Device::CUDA, "the host allocator cannot be replaced");
  Allocator* previous = cuda_allocator;
  cuda_allocator = allocator;
  return previous;
}

}  // namespace seqtrans
