// The decoder's rows and their self-attention keys and values, shared by every model kind with a decoder
// (docs/ARCHITECTURE.md §5): one slot per live hypothesis, each at its own position, and a pool of blocks
// of kBlockPositions positions that the slots' keys and values are written into.
#pragma once

#include <cstdint>
#include <vector>

#include "core/tensor.h"
#include "search/step_model.h"

namespace seqtrans {

// Positions per cache block: vLLM's default; a sequence wastes less than a block per beam.
inline constexpr int64_t kBlockPositions = 16;
// Most outputs end within 32 tokens; longer ones double the history's capacity (and record graphs again).
inline constexpr int64_t kInitialCacheCapacity = 32;

// Row counts a step graph is recorded for: 1, 2, 3, 4, 6, 8, 12, 16, 24, ... (powers of two and 1.5x
// them). Slot counts that change by a few reuse a graph, padding at most a third of its rows.
int64_t row_bucket(int64_t slots);
// The smallest of start, 2 start, 4 start, ... that reaches `needed`, capped at `limit` (if positive).
int64_t doubled_to(int64_t start, int64_t needed, int64_t limit);

// Self-attention cache blocks to reserve for a run's bounds with `rows` history rows.
int64_t reserved_blocks(const DecoderReservation& reservation, int64_t rows);

// Slots belong to sequences (a sentence and its beams, or a prompt), each in a sequence row. A sequence
// owns lanes, one per slot it has had at once; its k-th slot writes position p into block p / B of lane k,
// and every slot reads its keys through the history table (slot, position) -> block, so that beam
// reorders move only indices. Positions below p in a lane may be read by other beams; p itself is fresh.
// Blocks, not whole rows of the longest output: memory follows the lengths decoded (on newstest2014, whole
// rows held the pool at 256 rows x 256 positions once any output passed 128 tokens).
class RowPool {
 public:
  RowPool() = default;
  // `layers` key and value pools of `width` values a position.
  RowPool(size_t layers, int64_t width, DataType dtype, Device device);

  // Per slot, on the host; the model packs them into its step inputs.
  std::vector<int32_t> positions;  // tokens already fed
  std::vector<int32_t> sequences;  // its sequence's row
  std::vector<int32_t> reorder;    // the slot of the last step it continues (itself after a step, or new)
  std::vector<int32_t> lanes;      // its lane among its sequence's
  std::vector<int32_t> blocks;     // the block it writes this step (assign_blocks)

  int64_t slots() const { return static_cast<int64_t>(positions.size()); }
  // History rows (the most slots a step can hold) and the positions each holds.
  int64_t rows() const { return rows_; }
  int64_t capacity() const { return capacity_; }
  int64_t cache_blocks() const { return cache_blocks_; }
  int64_t sequence_rows() const { return sequence_rows_; }
  int64_t free_sequence_rows() const { return static_cast<int64_t>(free_rows_.size()); }
  // Counts the times the device buffers moved: graphs recorded against them are stale once it changes.
  int64_t moves() const { return moves_; }

  // On the device: [rows, capacity] int32, the block of each slot's key t; the layer's blocks [blocks, B, width].
  Tensor& history() { return history_; }
  Tensor& keys(size_t layer) { return keys_[layer]; }
  Tensor& values(size_t layer) { return values_[layer]; }

  // The history for at least `rows` slots and `capacity` positions, keeping what was written.
  void grow_history(int64_t rows, int64_t capacity);
  // At least `blocks` cache blocks, likewise.
  void grow_blocks(int64_t blocks);
  // `count` more sequence rows, free.
  void grow_sequence_rows(int64_t count);
  // A free sequence row, now taken with one empty lane (grow_sequence_rows first when none is free).
  int32_t take_sequence_row();
  // Rows taken but never joined (an admission that failed) go back, with any blocks their lanes took.
  void give_back_sequence_rows(const std::vector<int32_t>& rows);
  // A new slot for the sequence in `row`, continuing nothing, in its first lane, at `position`: 0, or past
  // a prompt whose keys are already in that lane's blocks and in history row slots() (prefill).
  void join(int32_t row, int32_t position = 0);
  // The block that lane `lane` of the sequence in `row` writes `position` into, taken from the free list
  // when the lane needs a new one (the pool grows by half when none is free).
  int32_t block_at(int32_t row, int32_t lane, int32_t position);
  // The history row of a slot in lane `lane` of the sequence in `row` for its first `length` positions
  // (each position's block, taken already by block_at), into out[0, length): what a prefill writes before
  // its slot joins.
  void lane_history(int32_t row, int32_t lane, int32_t length, int32_t* out) const;
  // Applies the pending reorder to the history on the device (each slot's row then holds the keys of the
  // slot it continues), so that the rows past the slots are free to write before the next step (a prefill).
  void settle_reorder();
  // History row `row` holds `length` positions written outside a step (a prefill): growing keeps them.
  void note_history(int64_t row, int32_t length);

  // The per-row inputs every model's step feeds ([rows()] int32 each, zeroed before): the ids, then
  // for each slot its position, key length (position + 1), the slot it continues and the block it writes
  // (assign_blocks). Padding rows (graphs only) feed `padding_id` at position 0 with no key and write no
  // block: they read and write nothing a slot uses. The key lengths are recorded (growing keeps them).
  struct StepInputRows {
    int32_t *ids, *positions, *key_lengths, *reorder, *cache_rows;
  };
  void write_step_inputs(const std::vector<int32_t>& input_ids, int32_t padding_id, const StepInputRows& rows);
  // After a step: positions advance and the pending reorder is spent.
  void advance();
  // Keeps the slots `sources` (with repeats: beams), in that order. Sequences left with no slot leave:
  // their blocks are free again, and their rows are returned (free again too, once the caller is done).
  const std::vector<int32_t>& select(const std::vector<int32_t>& sources);

  // Blocks expected to be free once every slot has filled blocks up to `reach` of its sequence (at least
  // its position + 1; [sequence rows]), wasting at most one block rounding up. Without this, iteration-level
  // batching kept 256 sentences in flight whatever their lengths, and its pool grew past the shrinking
  // batches' (newstest2014: 8,192 blocks against 4,096). Before the first step there is no pool to keep.
  int64_t room_left(const std::vector<int32_t>& reach) const;
  // Blocks `new_slots` slots need for `new_positions` positions.
  static int64_t room_needed(int64_t new_slots, int64_t new_positions);

 private:
  int32_t take_free_block();
  // The block each slot writes at its position (block_at), into `blocks`.
  void assign_blocks();

  Device device_ = Device::CPU;
  DataType dtype_ = DataType::F32;
  int64_t width_ = 0;
  std::vector<Tensor> keys_, values_;
  Tensor history_;
  int64_t rows_ = 0, capacity_ = 0, cache_blocks_ = 0, sequence_rows_ = 0, moves_ = 0;
  std::vector<std::vector<std::vector<int32_t>>> sequence_lanes_;  // [sequence row][lane] -> blocks
  std::vector<int32_t> free_rows_;
  std::vector<int32_t> free_blocks_;
  // What the device buffers hold written, so that growing them copies nothing else: positions per cache
  // block (its most), and per history row the key lengths of the last step.
  std::vector<int32_t> block_fill_;
  std::vector<int32_t> history_lengths_;
  // select()'s next per-slot vectors and per-sequence counts, kept so that a step allocates nothing.
  struct {
    std::vector<int32_t> positions, sequences, reorder, lanes;
    std::vector<int32_t> slots_of_sequence, first_position, left;
    std::vector<char> had_slot;
  } next_;
};

// A free list's last entry (the last freed, still warm in cache), now taken. Which one does not matter
// otherwise: pools keep their size and every read goes through a table; this stays O(1) rather than a
// scan of thousands of free entries.
int32_t take_last(std::vector<int32_t>& free_list);
// values on `device` as [n] int32.
Tensor ids_tensor(const std::vector<int32_t>& values, Device device);

}  // namespace seqtrans
