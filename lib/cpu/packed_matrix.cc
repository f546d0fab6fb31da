#include "cpu/packed_matrix.h"

#include "core/error.h"
#include "cpu/isa.h"

namespace seqtrans::cpu {

PackedMatrix::PackedMatrix(ops::WeightFormat format, int64_t rows, int64_t cols)
    : format_(format), rows_(rows), cols_(cols) {}

std::shared_ptr<const PackedMatrix> pack_matrix(const Tensor& weight, ops::WeightFormat format) {
  SEQTRANS_CHECK(format == ops::WeightFormat::Packed, "pack_matrix: {} weights are not packed on the CPU",
                 ops::weight_format_name(format));
  if (cpu_isa() == Isa::Portable) return nullptr;
  const int64_t n = weight.dim(0), k = weight.dim(1);
  auto packed = std::make_shared<PackedMatrix>(format, n, k);
  constexpr int64_t width = PackedMatrix::kPanelWidth;
  packed->f32_ = Tensor({packed->panels(), k, width}, DataType::F32);
  const float* w = weight.data<float>();
  float* out = packed->f32_.data<float>();
  for (int64_t p = 0; p < packed->panels(); ++p)
    for (int64_t kk = 0; kk < k; ++kk)
      for (int64_t j = 0; j < width; ++j) {
        const int64_t row = p * width + j;
        out[(p * k + kk) * width + j] = row < n ? w[row * k + kk] : 0.0f;
      }
  return packed;
}

}  // namespace seqtrans::cpu
