// The CPU's packed fp32 products: one fused multiply-add chain per element in every build, and, through
// ops::matmul, the bits of the plain path (OpenBLAS) on every shape, whichever side computes a part.
#include <cmath>
#include <cstring>
#include <vector>

#include "catch.h"
#include "core/batch_invariance.h"
#include "cpu/cpu_ops.h"
#include "cpu/isa.h"
#include "cpu/packed_gemm.h"
#include "cpu/packed_matrix.h"
#include "ops/ops.h"
#include "ops/runtime.h"
#include "support/errors.h"
#include "support/random_tensor.h"

using namespace seqtrans;

namespace {

int64_t differing_floats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return -1;
  int64_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return differing;
}

// c = a x w^T as chains acc = fma(a[i, kk], w[j, kk], acc) from 0, then the plain path's epilogue.
std::vector<float> chained_product(const Tensor& a, const Tensor& w, const float* bias,
                                   std::optional<Activation> activation) {
  const int64_t m = a.dim(0), k = a.dim(1), n = w.dim(0);
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      float acc = 0.0f;
      for (int64_t kk = 0; kk < k; ++kk) acc = std::fma(a.data<float>()[i * k + kk], w.data<float>()[j * k + kk], acc);
      c[i * n + j] = acc;
    }
  if (bias != nullptr && activation)
    cpu::bias_activation_columns(c.data(), m, n, 0, n, bias, *activation);
  else if (bias != nullptr)
    cpu::add_bias_columns(c.data(), m, n, 0, n, bias);
  return c;
}

}  // namespace

TEST_CASE("packed fp32 products are one fused multiply-add chain per element, in every build", "[ops]") {
  if (cpu::cpu_isa() == cpu::Isa::Portable) {
    WARN("no AVX2 on this CPU: no packed kernels");
    return;
  }
  for (const cpu::Isa isa : {cpu::Isa::Portable, cpu::Isa::Avx2, cpu::Isa::Avx512}) {
    if (static_cast<int>(isa) > static_cast<int>(cpu::cpu_isa())) continue;
    for (int64_t m : {1, 5, 6, 7, 12, 13, 25})
      for (int64_t n : {16, 40, 48, 77})
        for (int64_t k : {1, 31, 256}) {
          const Tensor a = testing::random_floats({m, k}), w = testing::random_floats({n, k});
          const Tensor bias = testing::random_floats({n});
          const auto packed = cpu::pack_matrix(w, ops::WeightFormat::Packed);
          REQUIRE(packed != nullptr);
          for (const bool with_bias : {false, true}) {
            const std::optional<Activation> activation =
                with_bias && n % 2 == 0 ? std::optional<Activation>(Activation::Swish) : std::nullopt;
            const float* b = with_bias ? bias.data<float>() : nullptr;
            // Columns past n (the zero padding of the last panel) must not be written: c is wider.
            const int64_t ldc = n + 3;
            std::vector<float> c(static_cast<size_t>(m * ldc), 7.0f);
            cpu::packed_gemm_f32(a.data<float>(), m, *packed, 0, packed->panels(), c.data(), ldc, {b, activation}, isa);
            std::vector<float> got(static_cast<size_t>(m * n)), untouched;
            for (int64_t i = 0; i < m; ++i)
              for (int64_t j = 0; j < ldc; ++j) (j < n ? got[i * n + j] : untouched.emplace_back()) = c[i * ldc + j];
            INFO(cpu::isa_name(isa) << " m " << m << " n " << n << " k " << k << " bias " << with_bias);
            CHECK(differing_floats(got, chained_product(a, w, b, activation)) == 0);
            CHECK(untouched == std::vector<float>(untouched.size(), 7.0f));
          }
        }
  }
}

namespace {

// The products of a prepared weight give the plain path's bits before its panels are written (it packs on
// use), on the product that writes them, and after.
void check_prepared_products(const std::vector<int64_t>& row_counts, const std::vector<int64_t>& widths,
                             const std::vector<int64_t>& depths) {
  for (int64_t m : row_counts)
    for (int64_t n : widths)
      for (int64_t k : depths) {
        const Tensor a = testing::random_floats({m, k}), w = testing::random_floats({n, k});
        const Tensor bias = testing::random_floats({n});
        const auto packed = ops::prepare_weight(w, ops::WeightFormat::Packed);
        ops::MatmulOptions options;
        options.bias = &bias;
        options.activation = Activation::Swish;
        const Tensor plain = ops::matmul(a, w, options);
        options.prepared_b = packed.get();
        for (int use = 1; use <= cpu::PackedMatrix::kPackOnUse + 1; ++use) {
          const Tensor prepared = ops::matmul(a, w, options);
          const auto* matrix = static_cast<const cpu::PackedMatrix*>(packed.get());
          INFO("m " << m << " n " << n << " k " << k << " use " << use << " panels written "
                    << (matrix != nullptr && matrix->packed()));
          CHECK(differing_floats(prepared.to_float_vector(), plain.to_float_vector()) == 0);
        }
      }
}

}  // namespace

TEST_CASE("matmul sums every element in one chain on a CPU with the packed kernels, at any thread count", "[ops]") {
  // Whatever OpenBLAS's kernels (OPENBLAS_CORETYPE): the plain weight's panels are packed on the fly. Shapes
  // with edge tiles, few rows and columns, and k past OpenBLAS's first block.
  if (cpu::cpu_isa() == cpu::Isa::Portable) return;  // OpenBLAS computes there
  for (const int threads : {1, 2, 3}) {
    ops::set_cpu_threads(threads);
    for (int64_t m : {1, 7, 33})
      for (int64_t n : {16, 77, 300})
        for (int64_t k : {32, 1024}) {
          const Tensor a = testing::random_floats({m, k}), w = testing::random_floats({n, k});
          INFO("threads " << threads << " m " << m << " n " << n << " k " << k);
          CHECK(differing_floats(ops::matmul(a, w).to_float_vector(), chained_product(a, w, nullptr, std::nullopt)) == 0);
        }
  }
  ops::set_cpu_threads(2);
}

TEST_CASE("matmul with a packed weight gives the plain path's bits on every shape", "[ops]") {
  // Few rows and columns, and k past OpenBLAS's first block: before the panels are written (packed on the
  // fly), on the product that writes them, and after; split over threads by columns.
  check_prepared_products({1, 2, 4, 5, 9, 64, 256}, {16, 256, 768, 8000}, {32, 256, 1024});
}

TEST_CASE("in batch-invariant mode too, a packed weight gives the plain path's bits", "[ops][batch-invariance]") {
  const BatchInvariantScope invariant(true);
  check_prepared_products({1, 2, 3, 7, 64}, {16, 256, 1024}, {32, 256, 512});
}

TEST_CASE("a packed weight writes its panels on the kPackOnUse-th product that reads them", "[ops]") {
  if (cpu::cpu_isa() == cpu::Isa::Portable) return;  // no packed kernels on this CPU
  const auto count_until_packed = [](const Tensor& w) {
    const Tensor a = testing::random_floats({64, w.dim(1)});
    const auto packed = ops::prepare_weight(w, ops::WeightFormat::Packed);
    const auto& matrix = static_cast<const cpu::PackedMatrix&>(*packed);
    ops::MatmulOptions options;
    options.prepared_b = packed.get();
    int products = 0;
    while (!matrix.packed() && products < 10) {
      ops::matmul(a, w, options);
      ++products;
    }
    return products;
  };
  // The packed kernels take every product here (a CPU with them): both weights are packed on their
  // kPackOnUse-th product, k = 1024 too.
  CHECK(count_until_packed(testing::random_floats({768, 256})) == cpu::PackedMatrix::kPackOnUse);
  CHECK(count_until_packed(testing::random_floats({256, 1024})) == cpu::PackedMatrix::kPackOnUse);
}

TEST_CASE("matmul refuses a prepared weight of another shape", "[ops]") {
  const Tensor a = testing::random_floats({3, 32}), w = testing::random_floats({48, 32});
  const auto packed = ops::prepare_weight(testing::random_floats({64, 32}), ops::WeightFormat::Packed);
  if (packed == nullptr) return;  // no packed kernels on this CPU
  ops::MatmulOptions options;
  options.prepared_b = packed.get();
  CHECK(testing::error_of([&] { ops::matmul(a, w, options); }).find("the prepared b is [64, 32]") != std::string::npos);
}
