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
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/tensor.h"
#include "ops/prepared_weight.h"

namespace seqtrans::cpu {

class PackedMatrix : public ops::PreparedWeight {
 public:
  static constexpr int64_t kPanelWidth = 16;

  PackedMatrix(ops::WeightFormat format, int64_t rows, int64_t cols);

  ops::WeightFormat format() const override { return format_; }
  int64_t rows() const override { return rows_; }
  int64_t cols() const override { return cols_; }
  int64_t panels() const { return (rows_ + kPanelWidth - 1) / kPanelWidth; }

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

  ops::WeightFormat format_;
  int64_t rows_, cols_;
  Tensor f32_;  // [panels, cols, kPanelWidth]
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

// `weight` [n, k] fp32 on the CPU in `format` (Packed or Int8); null where the CPU has no kernels for it
// (no AVX2).
std::shared_ptr<const PackedMatrix> pack_matrix(const Tensor& weight, ops::WeightFormat format);

}  // namespace seqtrans::cpu
