#include "models/position_runs.h"

#include <algorithm>

#include "core/error.h"

namespace seqtrans {

PositionRuns::PositionRuns(int64_t size) : size_(size) {
  SEQTRANS_CHECK(size >= 0, "position runs: a pool of {} positions", size);
  if (size > 0) free_.emplace(0, size);
}

int64_t PositionRuns::take(int64_t length) {
  SEQTRANS_CHECK(length >= 1, "position runs: a run of {} positions", length);
  for (auto it = free_.begin(); it != free_.end(); ++it) {
    if (it->second < length) continue;
    const int64_t start = it->first, left = it->second - length;
    free_.erase(it);
    if (left > 0) free_.emplace(start + length, left);
    used_ += length;
    return start;
  }
  return -1;
}

void PositionRuns::give_back(int64_t start, int64_t length) {
  SEQTRANS_CHECK(length >= 1 && start >= 0 && start + length <= size_ && length <= used_,
                 "position runs: cannot free [{}, {}) of {} positions", start, start + length, size_);
  auto next = free_.lower_bound(start);
  SEQTRANS_CHECK(next == free_.end() || next->first >= start + length, "position runs: [{}, {}) is partly free",
                 start, start + length);
  if (next != free_.begin()) {
    const auto before = std::prev(next);
    SEQTRANS_CHECK(before->first + before->second <= start, "position runs: [{}, {}) is partly free", start,
                   start + length);
  }
  used_ -= length;
  if (next != free_.end() && next->first == start + length) {
    length += next->second;
    next = free_.erase(next);
  }
  if (next != free_.begin()) {
    const auto before = std::prev(next);
    if (before->first + before->second == start) {
      before->second += length;
      return;
    }
  }
  free_.emplace(start, length);
}

}  // namespace seqtrans
