#include "cuda/runtime/arena.h"

#include <algorithm>

#include "cuda/runtime/check.h"

namespace seqtrans::cuda {
namespace {

constexpr size_t kMiB = size_t{1} << 20;
constexpr size_t kAlignment = 256;
constexpr size_t kChunkGranularity = 2 * kMiB;

size_t round_up(size_t value, size_t multiple) { return (value + multiple - 1) / multiple * multiple; }

double mebibytes(size_t bytes) { return static_cast<double>(bytes) / static_cast<double>(kMiB); }

}  // namespace

size_t CachingArena::size_class(size_t bytes) {
  bytes = std::max<size_t>(bytes, 1);
  if (bytes <= 1024) return round_up(bytes, kAlignment);
  if (bytes > 32 * kMiB) return round_up(bytes, kChunkGranularity);
  size_t power = 1024;
  while (power * 2 <= bytes) power *= 2;
  return round_up(bytes, power / 4);
}

CachingArena::CachingArena(int device_index, const ArenaOptions& options)
    : device_index_(device_index), options_(options) {
  free_blocks_[0];
  size_t initial = round_up(options_.initial_bytes, kChunkGranularity);
  // Under a cap, the up-front reservation is what the cap allows: the rest is met (and halved) in flight.
  if (options_.limit_bytes > 0) initial = std::min(initial, options_.limit_bytes / kChunkGranularity * kChunkGranularity);
  if (initial > 0) reserve(initial, 0);
}

CachingArena::~CachingArena() {
  // Process exit may already have torn the runtime down: errors here are not worth reporting.
  for (const Chunk& chunk : chunks_) cudaFree(chunk.base);
  cudaGetLastError();
}

CachingArena::Chunk& CachingArena::reserve(size_t block_bytes, size_t requested_bytes) {
  size_t preferred = round_up(std::max(block_bytes, options_.growth_bytes), kChunkGranularity);
  const size_t minimum = round_up(block_bytes, kChunkGranularity);
  if (options_.limit_bytes > 0) {
    // Under a cap, a reservation takes what is left of it, and none that would pass it: the same
    // OutOfMemoryError as a full device, so that the scheduler lowers its budget the same way.
    const size_t left = options_.limit_bytes > stats_.bytes_reserved ? options_.limit_bytes - stats_.bytes_reserved : 0;
    if (minimum > left)
      throw OutOfMemoryError(fmt::format(
          "out of GPU memory on device {}: a tensor of {:.1f} MiB does not fit in --max-gpu-memory {:.0f} MiB "
          "(seqtrans holds {:.1f} MiB, {:.1f} MiB in use); raise --max-gpu-memory or lower --max-batch-tokens",
          device_index_, mebibytes(requested_bytes), mebibytes(options_.limit_bytes),
          mebibytes(stats_.bytes_reserved), mebibytes(stats_.bytes_in_use)));
    preferred = std::max(minimum, std::min(preferred, left / kChunkGranularity * kChunkGranularity));
  }
  void* base = nullptr;
  size_t reserved = preferred;
  cudaError_t status = cudaMalloc(&base, preferred);
  if (status != cudaSuccess && minimum < preferred) {
    cudaGetLastError();
    reserved = minimum;
    status = cudaMalloc(&base, minimum);
  }
  if (status != cudaSuccess) {
    cudaGetLastError();
    size_t free_bytes = 0, total_bytes = 0;
    cudaMemGetInfo(&free_bytes, &total_bytes);
    cudaGetLastError();
    throw OutOfMemoryError(fmt::format(
        "out of GPU memory on device {}: cannot reserve {:.1f} MiB for a tensor of {:.1f} MiB ({}; seqtrans "
        "holds {:.1f} MiB, {:.1f} MiB in use; the device has {:.1f} MiB free of {:.1f} MiB); lower "
        "--max-batch-tokens",
        device_index_, mebibytes(minimum), mebibytes(requested_bytes), cudaGetErrorString(status),
        mebibytes(stats_.bytes_reserved), mebibytes(stats_.bytes_in_use), mebibytes(free_bytes),
        mebibytes(total_bytes)));
  }
  ++stats_.cuda_malloc_calls;
  stats_.bytes_reserved += reserved;
  chunks_.push_back({static_cast<char*>(base), reserved, 0});
  return chunks_.back();
}

void* CachingArena::take_free(FreeLists& lists, size_t block_bytes, size_t& granted) {
  for (auto it = lists.lower_bound(block_bytes); it != lists.end() && it->first <= 2 * block_bytes; ++it) {
    if (it->second.empty()) continue;
    void* block = it->second.back();
    it->second.pop_back();
    granted = it->first;
    return block;
  }
  return nullptr;
}

void* CachingArena::split_free(FreeLists& lists, size_t block_bytes) {
  for (auto it = lists.lower_bound(block_bytes); it != lists.end(); ++it) {
    if (it->second.empty()) continue;
    char* block = static_cast<char*>(it->second.back());
    const size_t rest = it->first - block_bytes;
    it->second.pop_back();
    if (rest > 0) lists[rest].push_back(block + block_bytes);  // block_bytes keeps the rest 256-byte aligned
    return block;
  }
  return nullptr;
}

void* CachingArena::allocate(size_t bytes) {
  const size_t block_bytes = size_class(bytes);
  std::lock_guard<std::mutex> lock(mutex_);
  size_t granted = block_bytes;
  // Reuse a free block of this class, or of a class at most twice as large: the active pool's own first,
  // then a shared one (which then belongs to the active pool until that pool is released).
  void* block = take_free(free_blocks_[active_pool_], block_bytes, granted);
  if (block == nullptr && active_pool_ != 0) block = take_free(free_blocks_[0], block_bytes, granted);
  if (block == nullptr) {
    granted = block_bytes;
    Chunk* chunk = nullptr;
    for (Chunk& candidate : chunks_)
      if (candidate.bytes - candidate.used >= block_bytes) {
        chunk = &candidate;
        break;
      }
    if (chunk == nullptr) {
      try {
        chunk = &reserve(block_bytes, bytes);
      } catch (const OutOfMemoryError&) {
        block = split_free(free_blocks_[active_pool_], block_bytes);
        if (block == nullptr && active_pool_ != 0) block = split_free(free_blocks_[0], block_bytes);
        if (block == nullptr) throw;
      }
    }
    if (block == nullptr) {
      block = chunk->base + chunk->used;
      chunk->used += block_bytes;
    }
  }
  live_blocks_.emplace(block, LiveBlock{granted, active_pool_});
  ++stats_.allocations;
  stats_.bytes_in_use += granted;
  stats_.peak_bytes_in_use = std::max(stats_.peak_bytes_in_use, stats_.bytes_in_use);
  return block;
}

void CachingArena::deallocate(void* pointer, size_t) {
  if (pointer == nullptr) return;
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = live_blocks_.find(pointer);
  // Storage frees through the allocator it came from, so a pointer not live here is a double free or a
  // stray pointer: putting it on a free list would hand the same memory out twice.
  SEQTRANS_CHECK(it != live_blocks_.end(), "CUDA arena of device {}: {} was not handed out by it, or was freed twice",
                 device_index_, pointer);
  // Work queued on the one stream that still reads this block runs before any later use of it, which is
  // queued behind it on the same stream: the block may be reused at once.
  const auto pool = free_blocks_.find(it->second.pool);
  FreeLists& lists = pool != free_blocks_.end() ? pool->second : free_blocks_[0];
  lists[it->second.bytes].push_back(pointer);
  stats_.bytes_in_use -= it->second.bytes;
  live_blocks_.erase(it);
}

int CachingArena::create_pool() {
  std::lock_guard<std::mutex> lock(mutex_);
  const int pool = next_pool_++;
  free_blocks_[pool];
  return pool;
}

int CachingArena::activate_pool(int pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  SEQTRANS_CHECK(free_blocks_.count(pool) == 1, "memory pool {} does not exist", pool);
  const int previous = active_pool_;
  active_pool_ = pool;
  return previous;
}

void CachingArena::release_pool(int pool) {
  std::lock_guard<std::mutex> lock(mutex_);
  const auto it = free_blocks_.find(pool);
  if (pool == 0 || it == free_blocks_.end()) return;
  FreeLists& shared = free_blocks_[0];
  for (auto& [bytes, blocks] : it->second) shared[bytes].insert(shared[bytes].end(), blocks.begin(), blocks.end());
  free_blocks_.erase(it);
  for (auto& [block, live] : live_blocks_)
    if (live.pool == pool) live.pool = 0;
  if (active_pool_ == pool) active_pool_ = 0;
}

MemoryStats CachingArena::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

}  // namespace seqtrans::cuda
