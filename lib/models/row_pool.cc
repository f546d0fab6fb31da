#include "models/row_pool.h"

#include <algorithm>
#include <limits>
#include <numeric>

#include "core/error.h"
#include "ops/ops.h"

namespace seqtrans {

int64_t row_bucket(int64_t slots) {
  int64_t power = 1;
  while (power < slots) {
    if (power * 3 / 2 >= slots && power >= 2) return power * 3 / 2;
    power *= 2;
  }
  return power;
}

int64_t doubled_to(int64_t start, int64_t needed, int64_t limit) {
  int64_t size = std::max<int64_t>(start, 1);
  while (size < needed) size *= 2;
  return limit > 0 ? std::min(size, std::max(limit, needed)) : size;
}

// Self-attention cache blocks for a run's bounds (the pool grows by half when sentences need more): every
// slot's whole output when the outputs' bound is known (one batch); else outputs as long as their sources,
// each slot holding its sentence's source in blocks, one of them partly empty (the same pools for both
// batching modes at one budget: newstest2014 at 256 sentences / 16,384 tokens, 5,120 blocks); else 32
// positions a slot.
int64_t reserved_blocks(const DecoderReservation& reservation, int64_t rows) {
  const auto blocks_for = [](int64_t positions) { return (positions + kBlockPositions - 1) / kBlockPositions; };
  if (reservation.target_length > 0) return rows * blocks_for(reservation.target_length);
  if (reservation.source_tokens > 0 && reservation.sentences > 0)
    return blocks_for(reservation.source_tokens * reservation.slots / reservation.sentences) + rows;
  return rows * blocks_for(kInitialCacheCapacity);
}

int32_t take_last(std::vector<int32_t>& free_list) {
  const int32_t entry = free_list.back();
  free_list.pop_back();
  return entry;
}

Tensor ids_tensor(const std::vector<int32_t>& values, Device device) {
  Tensor host = Tensor::from_ints({static_cast<int64_t>(values.size())}, values);
  return device == Device::CPU ? host : host.to(device);
}

namespace {

// A buffer of [rows, capacity, ...] holding `old`'s row i up to written[i] positions (the rest is never
// read: slots read only the positions they or their beam ancestors wrote, and padding rows read none).
Tensor regrow(const Tensor& old, const std::vector<int32_t>& written, int64_t rows, int64_t capacity,
              const Shape& trailing, DataType dtype, Device device) {
  Shape shape{rows, capacity};
  shape.insert(shape.end(), trailing.begin(), trailing.end());
  Tensor grown(shape, dtype, device);
  if (old.defined() && !written.empty()) ops::copy_row_prefixes(old, nullptr, ids_tensor(written, device), grown);
  return grown;
}

}  // namespace

RowPool::RowPool(size_t layers, int64_t width, DataType dtype, Device device)
    : device_(device), dtype_(dtype), width_(width), keys_(layers), values_(layers) {}

void RowPool::grow_history(int64_t rows, int64_t capacity) {
  if (rows <= rows_ && capacity <= capacity_) return;
  rows = std::max(rows, rows_);
  capacity = std::max(capacity, capacity_);
  history_lengths_.resize(static_cast<size_t>(rows_), 0);
  history_ = regrow(history_, history_lengths_, rows, capacity, {}, DataType::I32, device_);
  rows_ = rows;
  capacity_ = capacity;
  ++moves_;
}

void RowPool::grow_blocks(int64_t blocks) {
  if (blocks <= cache_blocks_) return;
  for (size_t layer = 0; layer < keys_.size(); ++layer) {
    keys_[layer] = regrow(keys_[layer], block_fill_, blocks, kBlockPositions, {width_}, dtype_, device_);
    values_[layer] = regrow(values_[layer], block_fill_, blocks, kBlockPositions, {width_}, dtype_, device_);
  }
  block_fill_.resize(static_cast<size_t>(blocks), 0);
  for (int64_t block = cache_blocks_; block < blocks; ++block) free_blocks_.push_back(static_cast<int32_t>(block));
  cache_blocks_ = blocks;
  ++moves_;
}

void RowPool::grow_sequence_rows(int64_t count) {
  if (count <= 0) return;
  const int64_t rows = sequence_rows_ + count;
  for (int64_t row = rows - 1; row >= sequence_rows_; --row) free_rows_.push_back(static_cast<int32_t>(row));
  sequence_lanes_.resize(static_cast<size_t>(rows));
  sequence_rows_ = rows;
}

int32_t RowPool::take_sequence_row() {
  SEQTRANS_CHECK(!free_rows_.empty(), "row pool: no free sequence row");
  const int32_t row = take_last(free_rows_);
  sequence_lanes_[static_cast<size_t>(row)].assign(1, {});
  return row;
}

void RowPool::give_back_sequence_rows(const std::vector<int32_t>& rows) {
  for (auto row = rows.rbegin(); row != rows.rend(); ++row) {
    for (const std::vector<int32_t>& lane : sequence_lanes_[static_cast<size_t>(*row)])
      free_blocks_.insert(free_blocks_.end(), lane.begin(), lane.end());
    sequence_lanes_[static_cast<size_t>(*row)].clear();
    free_rows_.push_back(*row);
  }
}

void RowPool::join(int32_t row, int32_t position) {
  positions.push_back(position);
  sequences.push_back(row);
  reorder.push_back(static_cast<int32_t>(reorder.size()));
  lanes.push_back(0);
}

int32_t RowPool::take_free_block() {
  if (free_blocks_.empty()) grow_blocks(cache_blocks_ + std::max<int64_t>(cache_blocks_ / 2, 1));
  return take_last(free_blocks_);
}

int32_t RowPool::block_at(int32_t row, int32_t lane_index, int32_t position) {
  std::vector<int32_t>& lane = sequence_lanes_[static_cast<size_t>(row)][static_cast<size_t>(lane_index)];
  const size_t index = static_cast<size_t>(position / kBlockPositions);
  while (lane.size() <= index) lane.push_back(take_free_block());
  int32_t& fill = block_fill_[static_cast<size_t>(lane[index])];
  fill = std::max(fill, static_cast<int32_t>(position % kBlockPositions + 1));
  return lane[index];
}

void RowPool::lane_history(int32_t row, int32_t lane_index, int32_t length, int32_t* out) const {
  const std::vector<int32_t>& lane = sequence_lanes_[static_cast<size_t>(row)][static_cast<size_t>(lane_index)];
  SEQTRANS_CHECK(static_cast<int64_t>(lane.size()) * kBlockPositions >= length,
                 "row pool: lane of {} blocks read for {} positions", lane.size(), length);
  for (int32_t position = 0; position < length; ++position) out[position] = lane[position / kBlockPositions];
}

void RowPool::assign_blocks() {
  const int64_t count = slots();
  blocks.resize(static_cast<size_t>(count));
  for (int64_t slot = 0; slot < count; ++slot) blocks[slot] = block_at(sequences[slot], lanes[slot], positions[slot]);
}

void RowPool::settle_reorder() {
  const int64_t count = slots();
  bool pending = false;
  for (int64_t slot = 0; slot < count; ++slot) pending = pending || reorder[slot] != slot;
  if (!pending) return;
  // Slot s has written positions [0, positions[s]); a copy first, since rows may swap.
  const Tensor index = ids_tensor(reorder, device_), written = ids_tensor(positions, device_);
  Tensor reordered({count, capacity_}, DataType::I32, device_);
  ops::copy_row_prefixes(history_, &index, written, reordered);
  Tensor kept = history_.slice_rows(0, count);
  ops::copy_row_prefixes(reordered, nullptr, written, kept);
  history_lengths_.resize(static_cast<size_t>(rows_), 0);
  std::copy(positions.begin(), positions.end(), history_lengths_.begin());
  std::iota(reorder.begin(), reorder.end(), 0);
}

void RowPool::note_history(int64_t row, int32_t length) {
  history_lengths_.resize(static_cast<size_t>(rows_), 0);
  history_lengths_[static_cast<size_t>(row)] = length;
}

void RowPool::write_step_inputs(const std::vector<int32_t>& input_ids, int32_t padding_id,
                                const StepInputRows& rows) {
  const int64_t count = slots();
  assign_blocks();
  std::copy(input_ids.begin(), input_ids.end(), rows.ids);
  std::fill(rows.ids + count, rows.ids + rows_, padding_id);
  std::copy(positions.begin(), positions.end(), rows.positions);
  for (int64_t s = 0; s < count; ++s) rows.key_lengths[s] = positions[s] + 1;
  std::iota(rows.reorder, rows.reorder + rows_, 0);
  std::copy(reorder.begin(), reorder.end(), rows.reorder);
  std::fill(rows.cache_rows, rows.cache_rows + rows_, -1);
  std::copy(blocks.begin(), blocks.end(), rows.cache_rows);
  history_lengths_.assign(rows.key_lengths, rows.key_lengths + rows_);
}

void RowPool::advance() {
  for (int32_t& position : positions) ++position;
  std::iota(reorder.begin(), reorder.end(), 0);
}

const std::vector<int32_t>& RowPool::select(const std::vector<int32_t>& sources) {
  const int64_t old_slots = slots();
  auto& [next_positions, next_sequences, next_reorder, next_lanes, slots_of_sequence, first_position, left,
         had_slot] = next_;
  next_positions.clear();
  next_sequences.clear();
  next_reorder.clear();
  next_lanes.clear();
  left.clear();
  // The k-th new slot of a sequence writes the sequence's lane k. All its slots sit at one position p, and
  // no lane of the sequence holds p yet, so any such assignment is safe.
  slots_of_sequence.assign(static_cast<size_t>(sequence_rows_), 0);
  first_position.assign(static_cast<size_t>(sequence_rows_), -1);
  for (const int32_t source : sources) {
    SEQTRANS_CHECK(source >= 0 && source < old_slots, "select: slot {} out of {}", source, old_slots);
    const int32_t sequence = sequences[source], position = positions[source];
    int32_t& first = first_position[sequence];
    SEQTRANS_CHECK(first < 0 || first == position, "select: slots of one sequence at positions {} and {}", first,
                   position);
    first = position;
    const int32_t lane = slots_of_sequence[sequence]++;
    auto& lanes_of_row = sequence_lanes_[static_cast<size_t>(sequence)];
    if (static_cast<size_t>(lane) == lanes_of_row.size()) lanes_of_row.emplace_back();
    next_positions.push_back(position);
    next_sequences.push_back(sequence);
    next_reorder.push_back(reorder[source]);
    next_lanes.push_back(lane);
  }
  had_slot.assign(static_cast<size_t>(sequence_rows_), 0);
  for (const int32_t sequence : sequences) had_slot[sequence] = 1;
  for (int32_t sequence = 0; sequence < sequence_rows_; ++sequence) {
    if (!had_slot[sequence] || slots_of_sequence[sequence] > 0) continue;
    for (const std::vector<int32_t>& lane : sequence_lanes_[static_cast<size_t>(sequence)])
      free_blocks_.insert(free_blocks_.end(), lane.begin(), lane.end());
    sequence_lanes_[static_cast<size_t>(sequence)].clear();
    free_rows_.push_back(sequence);
    left.push_back(sequence);
  }
  std::swap(positions, next_positions);
  std::swap(sequences, next_sequences);
  std::swap(reorder, next_reorder);
  std::swap(lanes, next_lanes);
  return left;
}

int64_t RowPool::room_left(const std::vector<int32_t>& reach) const {
  if (cache_blocks_ == 0) return std::numeric_limits<int64_t>::max();
  int64_t expected = 0;
  for (size_t s = 0; s < positions.size(); ++s) {
    const int64_t end = std::max<int64_t>(positions[s], reach[static_cast<size_t>(sequences[s])]) + 1;
    expected += (end + kBlockPositions - 1) / kBlockPositions;
  }
  return cache_blocks_ - expected;
}

int64_t RowPool::room_needed(int64_t new_slots, int64_t new_positions) {
  return new_positions / kBlockPositions + new_slots;
}

}  // namespace seqtrans
