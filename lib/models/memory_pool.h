// The encoder memory of the sequences in flight (encoder-decoder models): a pool of positions where each
// sequence row holds its source's cross-attention keys and values as one run (docs/ARCHITECTURE.md §5).
// Runs, not rows of the longest source: rows made each of 256 sentences hold at least 128 positions on
// newstest2014, twice the token budget's 16,384 or more. A run is contiguous, so cross-attention reads it
// like a row, and a freed run leaves a hole that a compaction closes when no hole is long enough.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "models/position_runs.h"

namespace seqtrans {

class MemoryPool {
 public:
  MemoryPool() = default;
  // `layers` key and value pools of `width` values a position; sources of at most `max_positions`. Each
  // compaction that moves runs in flight adds one to *compactions (statistics; may be null).
  MemoryPool(size_t layers, int64_t width, int64_t max_positions, DataType dtype, Device device,
             int64_t* compactions);

  // Per sequence row, on the host: its run's start and length.
  std::vector<int32_t> starts;
  std::vector<int32_t> lengths;

  int64_t positions() const { return runs_.size(); }
  // A power of two from 32, at least every source length in flight: graphs hold it.
  int64_t span() const { return span_; }
  // Counts the times the buffers moved or the span changed: graphs recorded before are stale then.
  int64_t moves() const { return moves_; }

  // On the device: the layer's pool [positions, 1, width].
  Tensor& keys(size_t layer) { return keys_[layer]; }
  Tensor& values(size_t layer) { return values_[layer]; }

  // Room for rows up to `rows`.
  void resize_rows(int64_t rows);
  // A run for each of `lengths` (its start), making room when the free runs do not hold them: the runs of
  // `live` rows move to the front, of a larger pool when they and the newcomers do not fit.
  std::vector<int32_t> place(const std::vector<int32_t>& lengths, const std::vector<int32_t>& live);
  // The run of `row` is free again.
  void give_back(int32_t row);
  // Runs taken by place() and never used (an admission that failed) are free again.
  void give_back_runs(const std::vector<int32_t>& starts_taken, const std::vector<int32_t>& lengths_taken);
  // A pool of at least `positions` positions, keeping the runs of `live` rows.
  void grow(int64_t positions, const std::vector<int32_t>& live);

 private:
  bool take_all(const std::vector<int32_t>& lengths, std::vector<int32_t>& taken);
  // Moves the runs of `live` rows to the front of a pool of `positions` positions (the same pool when it is
  // not larger; a new one when it is), so that the rest is one free run.
  void compact(int64_t positions, std::vector<int32_t> live);

  Device device_ = Device::CPU;
  DataType dtype_ = DataType::F32;
  int64_t width_ = 0, max_positions_ = 0, span_ = 0, moves_ = 0;
  int64_t* compactions_ = nullptr;
  std::vector<Tensor> keys_, values_;
  PositionRuns runs_;
};

}  // namespace seqtrans
