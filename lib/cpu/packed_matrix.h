// A weight [n, k] (PyTorch's [out, in]) packed once for the CPU's own matrix-product kernels
// (ops::prepare_weight): column panels of kPanelWidth output channels, panel p holding channels
// [p * kPanelWidth, (p + 1) * kPanelWidth) as [k][kPanelWidth], contiguous, the last panel padded with zero
// channels. A kernel then streams one panel row per k with aligned vector loads, and nothing is repacked at
// each product (OpenBLAS packs b at every call: 8% of a beam-4 run's time).
#pragma once

#include <cstdint>
#include <memory>

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

 private:
  friend std::shared_ptr<const PackedMatrix> pack_matrix(const Tensor& weight, ops::WeightFormat format);

  ops::WeightFormat format_;
  int64_t rows_, cols_;
  Tensor f32_;  // [panels, cols, kPanelWidth]
};

// `weight` [n, k] fp32 on the CPU in `format` (Packed); null where the CPU has no kernels for it (no AVX2).
std::shared_ptr<const PackedMatrix> pack_matrix(const Tensor& weight, ops::WeightFormat format);

}  // namespace seqtrans::cpu
