// The CPU ops' vectorized math against libm.
#include <cmath>
#include <cstring>
#include <limits>
#include <vector>

#include "catch.h"
#include "core/dtype.h"
#include "cpu/vector_math.h"
#include "support/random_tensor.h"

using namespace seqtrans;

TEST_CASE("exp_sum matches libm's exp summed in long double to double precision", "[ops]") {
  for (int64_t n : {0, 1, 3, 4, 7, 300, 8001}) {
    const Tensor values = testing::random_floats({std::max<int64_t>(n, 1)}, -800.0f, 0.0f);
    std::vector<float> x(values.data<float>(), values.data<float>() + n);
    for (int64_t i = 0; i < n; i += 5) x[i] = -std::numeric_limits<float>::infinity();
    for (int64_t i = 1; i < n; i += 7) x[i] = -static_cast<float>(i % 40) / 3.0f;  // the range that counts
    if (n > 2) x[2] = 0.0f;  // the maximum: exp(0) = 1
    const float shift = 0.5f;
    for (float& v : x) v += shift;  // exp_sum subtracts it again (in float, as log_softmax does)
    long double reference = 0;
    for (float v : x) reference += std::exp(static_cast<long double>(v - shift));
    const double got = cpu::exp_sum(x.data(), n, shift);
    INFO("n " << n);
    if (n == 0) {
      CHECK(got == 0.0);
      continue;
    }
    CHECK(std::abs(got - static_cast<double>(reference)) <= 1e-14 * static_cast<double>(reference));
  }
}

TEST_CASE("exp_sum gives the same bits in every build the CPU runs", "[ops]") {
  const cpu::Isa widest = cpu::cpu_isa();
  INFO("widest build: " << cpu::isa_name(widest));
  for (int64_t n : {0, 1, 5, 8, 15, 16, 17, 31, 33, 100, 8000, 8003}) {
    const Tensor values = testing::random_floats({std::max<int64_t>(n, 1)}, -60.0f, 0.0f);
    std::vector<float> x(values.data<float>(), values.data<float>() + n);
    for (int64_t i = 3; i < n; i += 11) x[i] = -std::numeric_limits<float>::infinity();
    for (int64_t i = 4; i < n; i += 13) x[i] = -750.0f;  // below exp's range: counts 0
    const double portable = cpu::exp_sum(x.data(), n, 0.25f, cpu::Isa::Portable);
    for (cpu::Isa isa : {cpu::Isa::Avx2, cpu::Isa::Avx512}) {
      if (static_cast<int>(isa) > static_cast<int>(widest)) continue;
      const double got = cpu::exp_sum(x.data(), n, 0.25f, isa);
      INFO("n " << n << " build " << cpu::isa_name(isa));
      CHECK(std::memcmp(&got, &portable, sizeof(double)) == 0);
    }
  }
}

TEST_CASE("halves_to_floats gives half_to_float's bits for every half, subnormals included; NaN for NaN", "[ops]") {
  std::vector<uint16_t> halves(65536 + 3);  // + 3: a tail past the 8-wide blocks
  for (size_t i = 0; i < halves.size(); ++i) halves[i] = static_cast<uint16_t>(i);
  std::vector<float> converted(halves.size());
  halves_to_floats(halves.data(), converted.data(), static_cast<int64_t>(halves.size()));
  int wrong = 0;
  for (size_t i = 0; i < halves.size(); ++i) {
    const float expected = half_to_float(halves[i]);
    // F16C quiets signaling NaNs: a NaN must stay a NaN, every other value keep its bits.
    wrong += std::isnan(expected) ? !std::isnan(converted[i]) : std::memcmp(&expected, &converted[i], sizeof(float)) != 0;
  }
  CHECK(wrong == 0);
}
