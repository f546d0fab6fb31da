#include "core/host_arena.h"

#include <sys/mman.h>

#include <algorithm>
#include <cerrno>
#include <cstdint>
#include <cstring>

#include "core/error.h"

namespace seqtrans {
namespace {

constexpr size_t kHugePage = size_t{2} << 20;
// Mappings are at least this large, so that a model's weights take a few: the unused end of the last one
// is address space, not memory.
constexpr size_t kMinMapping = size_t{32} << 20;
// As the host allocator: cache lines and the widest vector loads.
constexpr size_t kAlignment = 64;

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

thread_local HostArena* scoped_arena = nullptr;

}  // namespace

HostArenaRef HostArena::open() { return HostArenaRef(new HostArena()); }

HostArena::~HostArena() {
  for (const Mapping& mapping : mappings_) ::munmap(mapping.base, mapping.bytes);
}

void* HostArena::allocate(size_t bytes) {
  const size_t rounded = round_up(std::max<size_t>(bytes, 1), kAlignment);
  std::lock_guard<std::mutex> lock(mutex_);
  if (next_ == nullptr || rounded > static_cast<size_t>(end_ - next_)) {
    // One huge page more than needed, so that the start can move up to a huge-page boundary: the kernel
    // backs only aligned 2 MiB ranges with huge pages.
    const size_t usable = std::max(round_up(rounded, kHugePage), kMinMapping);
    const size_t mapped = usable + kHugePage;
    void* base = ::mmap(nullptr, mapped, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (base == MAP_FAILED)
      throw Error(fmt::format("out of host memory mapping {} bytes: {}", mapped, std::strerror(errno)));
    mappings_.push_back({static_cast<char*>(base), mapped});
    next_ = reinterpret_cast<char*>(round_up(reinterpret_cast<uintptr_t>(base), kHugePage));
    end_ = next_ + usable;
    // Advice, not a requirement: where transparent huge pages are off this fails and 4 KiB pages serve.
    ::madvise(next_, usable, MADV_HUGEPAGE);
  }
  void* pointer = next_;
  next_ += rounded;
  ++holds_;
  return pointer;
}

void HostArena::deallocate(void*, size_t) { release(); }

void HostArena::hold() {
  std::lock_guard<std::mutex> lock(mutex_);
  ++holds_;
}

void HostArena::release() {
  bool last = false;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    last = --holds_ == 0;
  }
  if (last) delete this;
}

HostArenaScope::HostArenaScope(HostArena* arena)
    : previous_(set_thread_allocator(Device::CPU, arena)), previous_arena_(scoped_arena) {
  scoped_arena = arena;
}

HostArenaScope::~HostArenaScope() {
  set_thread_allocator(Device::CPU, previous_);
  scoped_arena = previous_arena_;
}

HostArena* current_host_arena() { return scoped_arena; }

}  // namespace seqtrans
