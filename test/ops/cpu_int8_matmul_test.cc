// The CPU's int8 products: every kernel computes the quantized product exactly as specified (the same bits),
// and the result stays within the error that quantizing both operands can cause against the fp32 product.
#include <algorithm>
#include <cmath>
#include <cstring>
#include <vector>

#include "catch.h"
#include "cpu/cpu_ops.h"
#include "cpu/isa.h"
#include "cpu/packed_gemm.h"
#include "cpu/packed_matrix.h"
#include "ops/ops.h"
#include "support/random_tensor.h"

using namespace seqtrans;

namespace {

bool has_int8_kernels() { return cpu::cpu_isa() != cpu::Isa::Portable; }

// Symmetric int8 of one row: scale = max |x| / 127, q = round(x / scale), as the header specifies.
struct QuantizedRow {
  float scale = 0.0f;
  std::vector<int32_t> q;
};
QuantizedRow quantize(const float* x, int64_t k) {
  QuantizedRow row;
  float largest = 0.0f;
  for (int64_t i = 0; i < k; ++i) largest = std::max(largest, std::abs(x[i]));
  row.scale = largest / 127.0f;
  const float inverse = largest > 0.0f ? 127.0f / largest : 0.0f;
  for (int64_t i = 0; i < k; ++i)
    row.q.push_back(static_cast<int32_t>(std::clamp(std::nearbyint(x[i] * inverse), -127.0f, 127.0f)));
  return row;
}

// c[i, j] = float(sum q_x q_w) * (scale_x[i] * scale_w[j]), then bias and activation as the plain path.
std::vector<float> quantized_product(const Tensor& a, const Tensor& w, const float* bias,
                                     std::optional<Activation> activation) {
  const int64_t m = a.dim(0), k = a.dim(1), n = w.dim(0);
  std::vector<QuantizedRow> rows, channels;
  for (int64_t i = 0; i < m; ++i) rows.push_back(quantize(a.data<float>() + i * k, k));
  for (int64_t j = 0; j < n; ++j) channels.push_back(quantize(w.data<float>() + j * k, k));
  std::vector<float> c(static_cast<size_t>(m * n));
  for (int64_t i = 0; i < m; ++i)
    for (int64_t j = 0; j < n; ++j) {
      int64_t sum = 0;
      for (int64_t kk = 0; kk < k; ++kk) sum += int64_t{rows[i].q[kk]} * channels[j].q[kk];
      c[i * n + j] = static_cast<float>(sum) * (rows[i].scale * channels[j].scale);
    }
  if (bias != nullptr && activation)
    cpu::bias_activation_columns(c.data(), m, n, 0, n, bias, *activation);
  else if (bias != nullptr)
    cpu::add_bias_columns(c.data(), m, n, 0, n, bias);
  return c;
}

int64_t differing_floats(const std::vector<float>& a, const std::vector<float>& b) {
  if (a.size() != b.size()) return -1;
  int64_t differing = 0;
  for (size_t i = 0; i < a.size(); ++i) differing += std::memcmp(&a[i], &b[i], sizeof(float)) != 0;
  return differing;
}

}  // namespace

TEST_CASE("int8 products: every kernel gives the quantized product's bits", "[ops]") {
  if (!has_int8_kernels()) {
    WARN("no AVX2 on this CPU: no int8 kernels");
    return;
  }
  std::vector<cpu::Int8Kernel> kernels = {cpu::Int8Kernel::Avx2};
  if (cpu::cpu_has_avx512_vnni()) kernels.push_back(cpu::Int8Kernel::Avx512Vnni);
  for (const cpu::Int8Kernel kernel : kernels)
    for (int64_t m : {1, 3, 4, 5, 9, 17})
      for (int64_t n : {16, 40, 77})
        for (int64_t k : {1, 6, 64, 255}) {
          const Tensor a = testing::random_floats({m, k}, -4.0f, 4.0f), w = testing::random_floats({n, k});
          const Tensor bias = testing::random_floats({n});
          const auto packed = cpu::pack_matrix(w, ops::WeightFormat::Int8);
          REQUIRE(packed != nullptr);
          std::vector<uint8_t> q(static_cast<size_t>(m * packed->quads() * 4));
          std::vector<float> scales(static_cast<size_t>(m));
          cpu::quantize_rows(a.data<float>(), m, k, packed->quads(), cpu::int8_offset(kernel), q.data(), scales.data());
          const std::optional<Activation> activation =
              n % 2 == 0 ? std::optional<Activation>(Activation::Swish) : std::nullopt;
          const int64_t ldc = n + 5;  // columns past n must stay untouched
          std::vector<float> c(static_cast<size_t>(m * ldc), 7.0f);
          cpu::packed_gemm_i8(q.data(), scales.data(), m, *packed, 0, packed->panels(), c.data(), ldc,
                              {bias.data<float>(), activation}, kernel);
          std::vector<float> got, untouched;
          for (int64_t i = 0; i < m; ++i)
            for (int64_t j = 0; j < ldc; ++j) (j < n ? got : untouched).push_back(c[i * ldc + j]);
          INFO((kernel == cpu::Int8Kernel::Avx2 ? "avx2" : "vnni") << " m " << m << " n " << n << " k " << k);
          CHECK(differing_floats(got, quantized_product(a, w, bias.data<float>(), activation)) == 0);
          CHECK(untouched == std::vector<float>(untouched.size(), 7.0f));
        }
}

TEST_CASE("int8 matmul stays within quantization's error bound of the fp32 product", "[ops]") {
  if (!has_int8_kernels()) return;
  // Rounding x and w to their int8 grids moves each by at most half a step (s_x, s_w), so
  // |x.w - x~.w~| <= sum |x| s_w / 2 + sum |w| s_x / 2 + k s_x s_w / 4; fp32 rounding of the sums adds a
  // little more, allowed for as 1e-5 of sum |x w|.
  for (int64_t m : {1, 7, 64})
    for (int64_t n : {16, 300})
      for (int64_t k : {32, 256, 1024}) {
        const Tensor a = testing::random_floats({m, k}, -2.0f, 2.0f), w = testing::random_floats({n, k}, -0.1f, 0.1f);
        if (m > 1) a.data<float>()[k + 3] = 9.0f;  // an outlier widens row 1's step
        const auto int8 = ops::prepare_weight(w, ops::WeightFormat::Int8);
        ops::MatmulOptions options;
        options.prepared_b = int8.get();
        const std::vector<float> got = ops::matmul(a, w, options).to_float_vector();
        double worst_ratio = 0.0, squared_error = 0.0, squared_value = 0.0;
        for (int64_t i = 0; i < m; ++i) {
          const float* x = a.data<float>() + i * k;
          double x_abs = 0.0, x_max = 0.0;
          for (int64_t kk = 0; kk < k; ++kk) x_abs += std::abs(x[kk]), x_max = std::max(x_max, double{std::abs(x[kk])});
          const double s_x = x_max / 127.0;
          for (int64_t j = 0; j < n; ++j) {
            const float* wj = w.data<float>() + j * k;
            double exact = 0.0, w_abs = 0.0, w_max = 0.0, products = 0.0;
            for (int64_t kk = 0; kk < k; ++kk) {
              exact += double{x[kk]} * wj[kk];
              products += std::abs(double{x[kk]} * wj[kk]);
              w_abs += std::abs(wj[kk]);
              w_max = std::max(w_max, double{std::abs(wj[kk])});
            }
            const double s_w = w_max / 127.0;
            const double bound = x_abs * s_w / 2 + w_abs * s_x / 2 + k * s_x * s_w / 4 + 1e-5 * products;
            const double error = std::abs(got[i * n + j] - exact);
            worst_ratio = std::max(worst_ratio, error / bound);
            squared_error += error * error;
            squared_value += exact * exact;
          }
        }
        INFO("m " << m << " n " << n << " k " << k);
        CHECK(worst_ratio <= 1.0);
        // Typical error, far inside the bound: the roundings mostly cancel.
        CHECK(std::sqrt(squared_error / squared_value) < 0.02);
      }
}

TEST_CASE("int8 weights: per-channel scales, zero rows and padding stay zero", "[ops]") {
  if (!has_int8_kernels()) return;
  Tensor w = testing::random_floats({20, 10});
  for (int64_t kk = 0; kk < 10; ++kk) w.data<float>()[3 * 10 + kk] = 0.0f;  // channel 3: all zero
  w.data<float>()[5 * 10 + 2] = -254.0f;                                    // channel 5: scale 2
  const auto packed = cpu::pack_matrix(w, ops::WeightFormat::Int8);
  REQUIRE(packed != nullptr);
  CHECK(packed->scales()[3] == 0.0f);
  CHECK(packed->scales()[5] == 2.0f);
  CHECK(packed->scales()[20] == 0.0f);  // padding channels of the last panel
  const int8_t* panel = packed->i8_panel(0);
  CHECK(panel[((2 / 4) * cpu::PackedMatrix::kPanelWidth + 5) * 4 + 2 % 4] == -127);
  // k = 10 pads to 12: the last quad's two extra bytes of every channel are zero.
  for (int64_t j = 0; j < cpu::PackedMatrix::kPanelWidth; ++j) {
    CHECK(panel[(2 * cpu::PackedMatrix::kPanelWidth + j) * 4 + 2] == 0);
    CHECK(panel[(2 * cpu::PackedMatrix::kPanelWidth + j) * 4 + 3] == 0);
  }
  // A zero row of activations gives zeros (scale 0), not NaN.
  const Tensor a = Tensor::from_floats({1, 10}, std::vector<float>(10, 0.0f));
  ops::MatmulOptions options;
  options.prepared_b = packed.get();
  for (float v : ops::matmul(a, w, options).to_float_vector()) CHECK(v == 0.0f);
}
