#include "models/memory_pool.h"

#include <algorithm>

#include "core/error.h"
#include "core/profiler.h"
#include "models/row_pool.h"
#include "ops/ops.h"

namespace seqtrans {

namespace {

// Positions a compaction moves per copy (1 MiB at d = 256 in fp16).
constexpr int64_t kCompactionChunk = 2048;

}  // namespace

MemoryPool::MemoryPool(size_t layers, int64_t width, int64_t max_positions, DataType dtype, Device device,
                       int64_t* compactions)
    : device_(device),
      dtype_(dtype),
      width_(width),
      max_positions_(max_positions),
      compactions_(compactions),
      keys_(layers),
      values_(layers) {}

void MemoryPool::resize_rows(int64_t rows) {
  if (rows <= static_cast<int64_t>(starts.size())) return;
  starts.resize(static_cast<size_t>(rows), 0);
  lengths.resize(static_cast<size_t>(rows), 0);
}

bool MemoryPool::take_all(const std::vector<int32_t>& wanted, std::vector<int32_t>& taken) {
  taken.clear();
  for (const int32_t length : wanted) {
    const int64_t start = runs_.take(length);
    if (start < 0) {
      give_back_runs(taken, wanted);
      taken.clear();
      return false;
    }
    taken.push_back(static_cast<int32_t>(start));
  }
  return true;
}

std::vector<int32_t> MemoryPool::place(const std::vector<int32_t>& wanted, const std::vector<int32_t>& live) {
  int64_t needed = 0, longest = 0;
  for (const int32_t length : wanted) {
    needed += length;
    longest = std::max<int64_t>(longest, length);
  }
  const int64_t span = doubled_to(std::max(span_, kInitialCacheCapacity), longest, max_positions_);
  if (span != span_) {
    span_ = span;
    ++moves_;
  }
  std::vector<int32_t> taken;
  if (take_all(wanted, taken)) return taken;
  // Holes too short, or too few free positions: the runs in flight move to the front, of a larger pool
  // when they and the newcomers do not fit (doubling, so that growth stays rare).
  const int64_t used = runs_.used(), size = runs_.size();
  compact(used + needed <= size ? size : std::max(used + needed, 2 * size), live);
  SEQTRANS_CHECK(take_all(wanted, taken), "memory pool: no room for {} positions after compaction", needed);
  return taken;
}

void MemoryPool::give_back(int32_t row) {
  runs_.give_back(starts[static_cast<size_t>(row)], lengths[static_cast<size_t>(row)]);
}

void MemoryPool::give_back_runs(const std::vector<int32_t>& starts_taken, const std::vector<int32_t>& lengths_taken) {
  for (size_t i = 0; i < starts_taken.size(); ++i) runs_.give_back(starts_taken[i], lengths_taken[i]);
}

void MemoryPool::grow(int64_t positions, const std::vector<int32_t>& live) {
  if (positions <= runs_.size()) return;
  compact(positions, live);
}

void MemoryPool::compact(int64_t positions, std::vector<int32_t> live) {
  const ProfileScope profile("memory compaction");
  // The rows in flight by where their runs start, and the positions they hold in that order.
  std::sort(live.begin(), live.end(), [&](int32_t a, int32_t b) { return starts[a] < starts[b]; });
  std::vector<int32_t> kept;
  for (const int32_t row : live)
    for (int32_t t = 0; t < lengths[row]; ++t) kept.push_back(starts[row] + t);

  const int64_t size = runs_.size(), grown = std::max(positions, size), d = width_;
  const Tensor index = kept.empty() ? Tensor() : ids_tensor(kept, device_);
  const int64_t live_positions = static_cast<int64_t>(kept.size());
  if (live_positions > 0 && compactions_ != nullptr) ++*compactions_;
  const auto compact_one = [&](Tensor& pool) {
    Tensor target = grown > size || !pool.defined() ? Tensor({grown, 1, d}, dtype_, device_) : pool;
    // Through a copy of one chunk of live positions at a time: moving runs within one buffer would overlap,
    // and a copy of all of them would add the pool's size to the peak. kept is ascending, so kept[i] >= i:
    // a chunk's targets lie below every source of the chunks after it.
    for (int64_t first = 0; first < live_positions; first += kCompactionChunk) {
      const int64_t last = std::min(live_positions, first + kCompactionChunk);
      const Tensor moved = ops::gather_rows(pool.reshape({size, d}), index.slice_rows(first, last));
      Tensor front = target.reshape({grown, d}).slice_rows(first, last);
      ops::copy(moved, front);
    }
    pool = target;
  };
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    compact_one(keys_[layer]);
    compact_one(values_[layer]);
  }
  runs_ = PositionRuns(grown);
  for (const int32_t row : live) starts[row] = static_cast<int32_t>(runs_.take(lengths[row]));
  if (grown > size) ++moves_;
}

}  // namespace seqtrans
