#include "cpu/packed_matrix.h"

#include <algorithm>
#include <cmath>
#include <cstdlib>

#include "core/error.h"
#include "cpu/isa.h"
#include "cpu/packed_gemm.h"
#include "cpu/thread_pool.h"

namespace seqtrans::cpu {
namespace {

constexpr int64_t kWidth = PackedMatrix::kPanelWidth;
// Weights a thread packs at least: a part is then tens of microseconds of work.
constexpr int64_t kPackGrain = int64_t{1} << 16;

}  // namespace

// Output channel `row` into its panel: its scale, its q (in quads) and their sum.
void PackedMatrix::quantize_channel(const float* w_row, int64_t k, int64_t row, PackedMatrix& packed) {
  float largest = 0.0f;
  for (int64_t kk = 0; kk < k; ++kk) largest = std::max(largest, std::abs(w_row[kk]));
  const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
  int8_t* panel = packed.i8_.data() + (row / kWidth) * packed.quads() * kWidth * 4;
  const int64_t j = row % kWidth;
  int32_t sum = 0;
  for (int64_t kk = 0; kk < k; ++kk) {
    const float q = std::clamp(std::nearbyint(w_row[kk] * inverse), -127.0f, 127.0f);
    panel[((kk / 4) * kWidth + j) * 4 + kk % 4] = static_cast<int8_t>(q);
    sum += static_cast<int32_t>(q);
  }
  packed.scales_[row] = largest / 127.0f;
  packed.sums_[row] = sum;
}

PackedMatrix::PackedMatrix(ops::WeightFormat format, int64_t rows, int64_t cols)
    : format_(format), rows_(rows), cols_(cols) {}

void PackedMatrix::AlignedFree::operator()(int8_t* p) const { std::free(p); }

void PackedMatrix::write_f32_panels(const Tensor& weight) const {
  const int64_t n = rows_, k = cols_;
  const float* w = weight.data<float>();
  f32_ = Tensor({panels(), k, kWidth}, DataType::F32);
  float* out = f32_.data<float>();
  // Panels over the threads (a model's weights are tens of megabytes, first touched here); inside a part,
  // pack_f32_panels goes row by row: each weight row read once, front to back.
  parallel_for(panels(), std::max<int64_t>(1, kPackGrain / (k * kWidth)), [&](int64_t begin, int64_t end) {
    pack_f32_panels(w, /*transpose_b=*/true, n, k, begin, end, out + begin * k * kWidth);
  });
  packed_.store(true, std::memory_order_release);
}

bool PackedMatrix::use() const {
  if (packed()) return true;
  if (uses_.fetch_add(1, std::memory_order_relaxed) + 1 < kPackOnUse) return false;
  std::call_once(pack_once_, [this] {
    {
      const HostArenaScope scope(arena_.get());
      write_f32_panels(source_);
    }
    // The layer may hold only the weight's shape (WeightLoader::get_dense): then this frees the plain values.
    const std::lock_guard<std::mutex> lock(source_mutex_);
    source_ = Tensor();
    arena_ = HostArenaRef();
  });
  return true;
}

Tensor PackedMatrix::source() const {
  const std::lock_guard<std::mutex> lock(source_mutex_);
  return source_;
}

std::shared_ptr<const PackedMatrix> pack_matrix_on_use(const Tensor& weight) {
  if (cpu_isa() == Isa::Portable) return nullptr;
  auto packed = std::make_shared<PackedMatrix>(ops::WeightFormat::Packed, weight.dim(0), weight.dim(1));
  packed->source_ = weight;
  packed->arena_ = HostArenaRef(current_host_arena());
  return packed;
}

std::shared_ptr<const PackedMatrix> pack_matrix(const Tensor& weight, ops::WeightFormat format) {
  SEQTRANS_CHECK(format == ops::WeightFormat::Packed || format == ops::WeightFormat::Int8,
                 "pack_matrix: {} weights are not packed on the CPU", ops::weight_format_name(format));
  if (cpu_isa() == Isa::Portable) return nullptr;
  const int64_t n = weight.dim(0), k = weight.dim(1);
  auto packed = std::make_shared<PackedMatrix>(format, n, k);
  const float* w = weight.data<float>();
  const int64_t panels = packed->panels();
  if (format == ops::WeightFormat::Packed) {
    packed->write_f32_panels(weight);
    return packed;
  }
  const int64_t quads = packed->quads(), channels = panels * kWidth;
  const size_t bytes = static_cast<size_t>(channels * quads * 4);
  packed->i8_.bytes.reset(static_cast<int8_t*>(std::aligned_alloc(64, (bytes + 63) / 64 * 64)));
  SEQTRANS_CHECK(packed->i8_.data() != nullptr, "pack_matrix: out of memory for {} bytes", bytes);
  std::fill(packed->i8_.data(), packed->i8_.data() + bytes, int8_t{0});
  packed->scales_.assign(static_cast<size_t>(channels), 0.0f);
  packed->sums_.assign(static_cast<size_t>(channels), 0);
  parallel_for(n, std::max<int64_t>(1, kPackGrain / k), [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) PackedMatrix::quantize_channel(w + row * k, k, row, *packed);
  });
  packed->packed_.store(true, std::memory_order_release);
  return packed;
}

}  // namespace seqtrans::cpu
