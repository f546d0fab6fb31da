// Caching device allocator: a few large cudaMalloc reservations carved into size-class blocks, with a
// free list per class, so that steady-state translation calls cudaMalloc and cudaFree zero times.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <mutex>
#include <unordered_map>
#include <vector>

#include "core/allocator.h"

namespace seqtrans::cuda {

// Counters for tests and `seqtrans bench`; bytes are counted in whole size-class blocks.
struct MemoryStats {
  int64_t cuda_malloc_calls = 0;  // reservations made (each one cudaMalloc)
  int64_t allocations = 0;        // blocks handed out, reused or new
  size_t bytes_reserved = 0;      // total of all reservations
  size_t bytes_in_use = 0;        // blocks currently handed out
  size_t peak_bytes_in_use = 0;
};

struct ArenaOptions {
  size_t initial_bytes = 0;          // reserved up front; 0 reserves on first use
  size_t growth_bytes = 256u << 20;  // each later reservation is at least this large
  size_t limit_bytes = 0;            // the most all reservations may add up to (--max-gpu-memory); 0 = none
};

class CachingArena : public Allocator {
 public:
  CachingArena(int device_index, const ArenaOptions& options);
  ~CachingArena() override;
  CachingArena(const CachingArena&) = delete;
  CachingArena& operator=(const CachingArena&) = delete;

  void* allocate(size_t bytes) override;
  // Throws for a pointer this arena did not hand out or that is already free.
  void deallocate(void* pointer, size_t bytes) override;
  MemoryStats stats() const;

  // Private pools for CUDA graphs. A graph replays with the addresses its temporaries had when it was
  // captured, so those blocks must never be handed to anyone else while the graph lives: allocations
  // made while a pool is active come from it and go back to it. Pool 0 is the shared one.
  int create_pool();
  // Makes `pool` the one new allocations come from; returns the previously active pool.
  int activate_pool(int pool);
  // Gives the pool's blocks back to the shared lists (those still in use go back when freed).
  void release_pool(int pool);

  // The block size a request of `bytes` gets: 256-byte multiples up to 1 KiB, then four classes per power
  // of two (at most 25% slack), then 2 MiB steps past 32 MiB.
  static size_t size_class(size_t bytes);

 private:
  struct Chunk {
    char* base;
    size_t bytes;
    size_t used;
  };

  // Reserves a new chunk able to hold `block_bytes`; throws one line with the sizes and a hint.
  Chunk& reserve(size_t block_bytes, size_t requested_bytes);

  using FreeLists = std::map<size_t, std::vector<void*>>;  // class size -> free blocks of that class
  struct LiveBlock {
    size_t bytes;
    int pool;
  };

  // Takes a free block of class `block_bytes` or at most twice as large from `lists`; null if none.
  static void* take_free(FreeLists& lists, size_t block_bytes, size_t& granted);
  // The last resort when no chunk can be reserved (a full device, or the cap reached): the first `block_bytes`
  // of the smallest larger free block, whose rest stays free as a block of its own. Free blocks are never
  // merged, so without this a cap can fail a small request while most of it is free in large blocks.
  static void* split_free(FreeLists& lists, size_t block_bytes);

  int device_index_;
  ArenaOptions options_;
  mutable std::mutex mutex_;
  std::vector<Chunk> chunks_;
  std::map<int, FreeLists> free_blocks_;            // pool -> its free lists; pool 0 always exists
  std::unordered_map<void*, LiveBlock> live_blocks_;
  int active_pool_ = 0;
  int next_pool_ = 1;
  MemoryStats stats_;
};

}  // namespace seqtrans::cuda
