#include <cmath>

#include "cpu/cpu_ops.h"
#include "cpu/thread_pool.h"

namespace seqtrans::cpu {
namespace {

// Rows a thread takes at least (as layer_norm.cc).
constexpr int64_t kRowsPerPart = 32;

// out = weight * (row * rsqrt(mean(row^2) + epsilon)); the mean in double so the reference is not the noisy
// side, the scaled row rounded to float before the weight (Hugging Face's order).
void normalize_row(const float* row, int64_t width, const ops::RmsNormWeights& norm, float* out) {
  double squares = 0.0;
  for (int64_t i = 0; i < width; ++i) squares += static_cast<double>(row[i]) * row[i];
  const double inverse_rms = 1.0 / std::sqrt(squares / static_cast<double>(width) + norm.epsilon);
  const float* weight = norm.weight.data<float>();
  for (int64_t i = 0; i < width; ++i) out[i] = weight[i] * static_cast<float>(row[i] * inverse_rms);
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor* residual, const ops::RmsNormWeights& norm, Tensor* sum, Tensor& out) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  const float* in = x.data<float>();
  const float* skip = residual != nullptr ? residual->data<float>() : nullptr;
  float* sums = sum != nullptr ? sum->data<float>() : nullptr;
  float* result = out.data<float>();
  parallel_for(rows, kRowsPerPart, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* source = in + row * width;
      if (skip != nullptr) {
        float* sum_row = sums + row * width;
        for (int64_t i = 0; i < width; ++i) sum_row[i] = source[i] + skip[row * width + i];
        source = sum_row;
      }
      normalize_row(source, width, norm, result + row * width);
    }
  });
}

}  // namespace seqtrans::cpu
