// Host memory for a model's weights, in mappings the kernel may back with transparent huge pages.
//
// A CPU model's weights are tens of megabytes of fresh memory written once at load (fp16 converted to
// fp32, then panels packed). From malloc that is a page fault, a zeroed page and an LRU insertion per
// 4 KiB: on the 2-core test machine the faults of a one-line translate were a third of its CPU time, and
// freeing the pages at exit more. An arena hands out that memory from 2 MiB-aligned mappings advised
// MADV_HUGEPAGE (a fault per 2 MiB where the kernel allows it: transparent_hugepage "madvise" or "always";
// elsewhere the same 4 KiB pages as before).
//
// Memory is handed out by bumping a pointer and never reused: for tensors that live as long as the model.
// The arena unmaps everything once its last holder and its last allocation are gone, so tensors may
// outlive the model that made them.
#pragma once

#include <cstddef>
#include <mutex>
#include <utility>
#include <vector>

#include "core/allocator.h"

namespace seqtrans {

class HostArenaRef;

class HostArena final : public Allocator {
 public:
  // A new arena, held by the reference returned.
  static HostArenaRef open();

  void* allocate(size_t bytes) override;
  void deallocate(void* pointer, size_t bytes) override;

  // Holds keep the arena, allocations or not; the last release of a hold or an allocation frees it.
  void hold();
  void release();

 private:
  HostArena() = default;
  ~HostArena() override;
  struct Mapping {
    char* base;
    size_t bytes;
  };

  std::mutex mutex_;
  std::vector<Mapping> mappings_;
  char* next_ = nullptr;  // in the last mapping
  char* end_ = nullptr;
  size_t holds_ = 0;  // holders and live allocations
};

// A counted hold on an arena (null: none).
class HostArenaRef {
 public:
  HostArenaRef() = default;
  explicit HostArenaRef(HostArena* arena) : arena_(arena) {
    if (arena_ != nullptr) arena_->hold();
  }
  HostArenaRef(const HostArenaRef& other) : HostArenaRef(other.arena_) {}
  HostArenaRef& operator=(HostArenaRef other) {
    std::swap(arena_, other.arena_);
    return *this;
  }
  ~HostArenaRef() {
    if (arena_ != nullptr) arena_->release();
  }
  HostArena* get() const { return arena_; }

 private:
  HostArena* arena_ = nullptr;
};

// While alive, new host tensors made on the calling thread take their memory from `arena` (null: from
// the host allocator, as without a scope). Scopes nest.
class HostArenaScope {
 public:
  explicit HostArenaScope(HostArena* arena);
  ~HostArenaScope();
  HostArenaScope(const HostArenaScope&) = delete;
  HostArenaScope& operator=(const HostArenaScope&) = delete;

 private:
  Allocator* previous_;
  HostArena* previous_arena_;
};

// The arena of the calling thread's innermost scope, or null.
HostArena* current_host_arena();

}  // namespace seqtrans
