#include "models/position_runs.h"

#include <algorithm>

#include "core/error.h"

namespace seqtrans {

int64_t PositionRuns::longest_free() const {
  int64_t longest = 0;
  for (const auto& [start, length] : free_) longest = std::max(longest, length);
  return longest;
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

void PositionRuns::grow(int64_t new_size) {
  if (new_size <= size_) return;
  const int64_t added = new_size - size_;
  const auto last = free_.empty() ? free_.end() : std::prev(free_.end());
  if (last != free_.end() && last->first + last->second == size_)
    last->second += added;
  else
    free_.emplace(size_, added);
  size_ = new_size;
}

void PositionRuns::clear() {
  free_.clear();
  used_ = 0;
  if (size_ > 0) free_.emplace(0, size_);
}

}  // namespace seqtrans
