// A weight [n, k] (PyTorch's [out, in]) packed once for the CPU's own matrix-product kernels
// (ops::prepare_weight): column panels of kPanelWidth output channels, panel p holding channels
// [p * kPanelWidth, (p + 1) * kPanelWidth) as [k][kPanelWidth], contiguous, the last panel padded with zero
// channels. A kernel then streams one panel row per k with aligned vector loads, and nothing is repacked at
// each product (OpenBLAS packs b at every call: 8% of a beam-4 run's time).
//
// Int8 (WeightFormat::Int8) quantizes each output channel j symmetrically: w[j, kk] ~ scale[j] * q[j, kk],
// scale[j] = max |w[j, :]| / 127, q = round(w / scale) in [-127, 127]. A panel then holds k in quads (k padded
// with zeros to a multiple of 4): [quads][kPanelWidth][4] int8, the 4 bytes of a channel's quad together, as
// the int8 dot-product instructions (vpdpbusd, vpmaddubsw) read them.
//
// The fp32 panels of a model's weights are written on use (pack_matrix_on_use), not at load: a product
// that finds them missing packs the panels it reads on the fly, the same bits, so a weight is packed once
// kPackOnUse products have read it. A one-line translate then packs the weights its decoder steps read, not
// the encoder's (one pass). Where the layer holds only the weight's shape (WeightLoader::get_dense), the
// matrix's copy of the plain values is the only one, and writing the panels frees it.
#pragma once

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <vector>

#include "core/host_arena.h"
#include "core/tensor.h"
#include "ops/prepared_weight.h"

namespace seqtrans::cpu {

class PackedMatrix : public ops::PreparedWeight {
 public:
  static constexpr int64_t kPanelWidth = 16;
  // A matrix packed on use writes its panels on the kPackOnUse-th product that would read them.
  static constexpr int kPackOnUse = 2;

  PackedMatrix(ops::WeightFormat format, int64_t rows, int64_t cols);

  ops::WeightFormat format() const override { return format_; }
  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  int64_t panels() const { return (rows_ + kPanelWidth - 1) / kPanelWidth; }

  // Whether the panels are there (a matrix packed on use: once use() said so; any other: always).
  bool packed() const { return packed_.load(std::memory_order_acquire); }
  // Counts a product that would read the panels, and writes them if this is the kPackOnUse-th: true when
  // they are there. Called from the product's own thread, never inside a part of the pool (the panels are
  // written over it). Logically const: the products' bits are the same either way.
  bool use() const;
  // Packing on use: the plain weight the panels are written from, until they are; then undefined. The copy
  // keeps its memory for as long as the caller holds it, even where use() drops the matrix's own reference.
  Tensor source() const;

  // WeightFormat::Packed: panel p, [cols][kPanelWidth] floats.
  const float* f32_panel(int64_t p) const { return f32_.data<float>() + p * cols_ * kPanelWidth; }

  // WeightFormat::Int8: k in quads; panel p, [quads][kPanelWidth][4] int8.
  int64_t quads() const { return (cols_ + 3) / 4; }
  const int8_t* i8_panel(int64_t p) const { return i8_.data() + p * quads() * kPanelWidth * 4; }
  // Per output channel (panels * kPanelWidth, zero past rows()): the scale, and the sum of its q over k.
  const float* scales() const { return scales_.data(); }
  const int32_t* sums() const { return sums_.data(); }

 private:
  friend std::shared_ptr<const PackedMatrix> pack_matrix(const Tensor& weight, ops::WeightFormat format);
  friend std::shared_ptr<const PackedMatrix> pack_matrix_on_use(const Tensor& weight);
  static void quantize_channel(const float* w_row, int64_t k, int64_t row, PackedMatrix& packed);
  // Writes f32_ from `weight` (const: packing on use writes the mutable panels of a const matrix).
  void write_f32_panels(const Tensor& weight) const;

  ops::WeightFormat format_;
  int64_t rows_, cols_;
  // Packing on use: the plain weight until the panels are written from it, the arena they go to (that of
  // the model's weights, if it loaded in one), and the products counted.
  mutable Tensor source_;  // guarded by source_mutex_
  mutable std::mutex source_mutex_;
  mutable HostArenaRef arena_;
  mutable std::atomic<int> uses_{0};
  mutable std::once_flag pack_once_;
  mutable std::atomic<bool> packed_{false};
  mutable Tensor f32_;  // [panels, cols, kPanelWidth]
  struct AlignedFree {
    void operator()(int8_t* p) const;
  };
  struct Int8Buffer {
    std::unique_ptr<int8_t[], AlignedFree> bytes;
    int8_t* data() const { return bytes.get(); }
  } i8_;
  std::vector<float> scales_;
  std::vector<int32_t> sums_;
};

// `weight` [n, k] fp32 on the CPU in `format` (Packed or Int8), packed now; null where the CPU has no
// kernels for it (no AVX2).
std::shared_ptr<const PackedMatrix> pack_matrix(const Tensor& weight, ops::WeightFormat format);
// `weight` in WeightFormat::Packed, its panels written on use (PackedMatrix::use); it keeps `weight`'s
// storage until then. Null without AVX2.
std::shared_ptr<const PackedMatrix> pack_matrix_on_use(const Tensor& weight);

}  // namespace seqtrans::cpu
