// Device memory providers. Tensors take their storage from the allocator of their device.
#pragma once

#include <cstddef>
#include <memory>

#include "core/device.h"

namespace seqtrans {

// Hands out raw device memory; implementations decide whether memory is pooled.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t bytes) = 0;
  // May throw for a pointer it never handed out (a bug: Storage then stops the process).
  virtual void deallocate(void* pointer, size_t bytes) = 0;
};

// The allocator that new tensors on `device` use on the calling thread: for CUDA, the thread's own
// device's (set_thread_allocator), else the process-wide one. The CUDA runtime installs both.
Allocator& allocator_for(Device device);

// Lets the CUDA runtime (or a test) install the process-wide allocator for a device; returns the
// previous one.
Allocator* set_allocator(Device device, Allocator* allocator);

// The calling thread's allocator for `device` (with several GPUs, each engine thread computes on its
// own; on the host, a HostArenaScope's arena while a model loads); null falls back to the process-wide
// one. Returns the previous one.
Allocator* set_thread_allocator(Device device, Allocator* allocator);

}  // namespace seqtrans
