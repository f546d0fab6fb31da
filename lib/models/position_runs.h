// Runs of consecutive positions in a pool (the encoder memory pool: a sentence keeps its source as one run,
// read through its start). First fit: the lowest free run that is long enough.
#pragma once

#include <cstdint>
#include <map>

namespace seqtrans {

class PositionRuns {
 public:
  // `size` positions, all free.
  explicit PositionRuns(int64_t size = 0);

  int64_t size() const { return size_; }
  int64_t used() const { return used_; }

  // The start of `length` consecutive free positions, now taken; -1 when no free run is that long.
  int64_t take(int64_t length);
  // Frees a run take() gave (the whole run); merges it with its free neighbours.
  void give_back(int64_t start, int64_t length);

 private:
  std::map<int64_t, int64_t> free_;  // start -> length of each free run; neighbours never both free
  int64_t size_ = 0;
  int64_t used_ = 0;
};

}  // namespace seqtrans
