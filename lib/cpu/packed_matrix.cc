#include "cpu/packed_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "cpu/isa.h"

namespace seqtrans::cpu {
namespace {

constexpr int64_t kWidth = PackedMatrix::kPanelWidth;

}  // namespace

PackedMatrix::PackedMatrix(ops::WeightFormat format, int64_t rows, int64_t cols)
    : format_(format), rows_(rows), cols_(cols) {}

void PackedMatrix::AlignedFree::operator()(int8_t* p) const { std::free(p); }

std::shared_ptr<const PackedMatrix> pack_matrix(const Tensor& weight, ops::WeightFormat format) {
  SEQTRANS_CHECK(format == ops::WeightFormat::Packed || format == ops::WeightFormat::Int8,
                 "pack_matrix: {} weights are not packed on the CPU", ops::weight_format_name(format));
  if (cpu_isa() == Isa::Portable) return nullptr;
  const int64_t n = weight.dim(0), k = weight.dim(1);
  auto packed = std::make_shared<PackedMatrix>(format, n, k);
  const float* w = weight.data<float>();
  const int64_t panels = packed->panels();
  if (format == ops::WeightFormat::Packed) {
    packed->f32_ = Tensor({panels, k, kWidth}, DataType::F32);
    float* out = packed->f32_.data<float>();
    for (int64_t p = 0; p < panels; ++p)
      for (int64_t kk = 0; kk < k; ++kk)
        for (int64_t j = 0; j < kWidth; ++j) {
          const int64_t row = p * kWidth + j;
          out[(p * k + kk) * kWidth + j] = row < n ? w[row * k + kk] : 0.0f;
        }
    return packed;
  }
  const int64_t quads = packed->quads(), channels = panels * kWidth;
  const size_t bytes = static_cast<size_t>(channels * quads * 4);
  packed->i8_.bytes.reset(static_cast<int8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  SEQTRANS_CHECK(packed->i8_.data() != nullptr, "pack_matrix: out of memory for {} bytes", bytes);
  std::fill(packed->i8_.data(), packed->i8_.data() + bytes, int8_t{0});
  packed->scales_.assign(static_cast<size_t>(channels), 0.0f);
  packed->sums_.assign(static_cast<size_t>(channels), 0);
  for (int64_t row = 0; row < n; ++row) {
    const float* w_row = w + row * k;
    float largest = 0.0f;
    for (int64_t kk = 0; kk < k; ++kk) largest = std::max(largest, std::abs(w_row[kk]));
    const float scale = largest / 127.0f;
    const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
    int8_t* panel = packed->i8_.data() + (row / kWidth) * quads * kWidth * 4;
    const int64_t j = row % kWidth;
    int32_t sum = 0;
    for (int64_t kk = 0; kk < k; ++kk) {
      const float q = std::clamp(std::nearbyint(w_row[kk] * inverse), -127.0f, 127.0f);
      panel[((kk / 4) * kWidth + j) * 4 + kk % 4] = static_cast<int8_t>(q);
      sum += static_cast<int32_t>(q);
    }
    packed->scales_[row] = scale;
    packed->sums_[row] = sum;
  }
  return packed;
}

}  // namespace seqtrans::cpu
