#include <cmath>

#include "cpu/cpu_ops.h"
#include "cpu/thread_pool.h"

namespace seqtrans::cpu {
namespace {

// Rows a thread takes at least: a row is about a microsecond, a hand-over a few.
constexpr int64_t kRowsPerPart = 32;

// Normalizes one row in place; statistics in double so the reference is not the noisy side.
void normalize_row(float* row, int64_t width, const ops::LayerNormWeights& norm) {
  double mean = 0.0;
  for (int64_t i = 0; i < width; ++i) mean += row[i];
  mean /= static_cast<double>(width);
  double variance = 0.0;
  for (int64_t i = 0; i < width; ++i) variance += (row[i] - mean) * (row[i] - mean);
  variance /= static_cast<double>(width);
  const double inverse_std = 1.0 / std::sqrt(variance + norm.epsilon);
  const float* gamma = norm.gamma.data<float>();
  const float* beta = norm.beta.data<float>();
  for (int64_t i = 0; i < width; ++i)
    row[i] = static_cast<float>((row[i] - mean) * inverse_std) * gamma[i] + beta[i];
}

// layer_norm of rows [begin, end) of x.
void layer_norm_rows(const Tensor& x, const ops::LayerNormWeights& norm, Tensor& out, int64_t begin, int64_t end) {
  const int64_t width = x.dim(1);
  const float* in = x.data<float>();
  float* result = out.data<float>();
  for (int64_t row = begin; row < end; ++row) {
    float* out_row = result + row * width;
    for (int64_t i = 0; i < width; ++i) out_row[i] = in[row * width + i];
    normalize_row(out_row, width, norm);
  }
}

}  // namespace

void add_bias_residual_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                  const ops::LayerNormWeights& norm, Tensor& out) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  const float* in = x.data<float>();
  const float* skip = residual.data<float>();
  const float* b = bias.data<float>();
  float* result = out.data<float>();
  parallel_for(rows, kRowsPerPart, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      float* out_row = result + row * width;
      for (int64_t i = 0; i < width; ++i) out_row[i] = in[row * width + i] + b[i] + skip[row * width + i];
      normalize_row(out_row, width, norm);
    }
  });
}

void layer_norm(const Tensor& x, const ops::LayerNormWeights& norm, Tensor& out) {
  parallel_for(x.dim(0), kRowsPerPart, [&](int64_t begin, int64_t end) { layer_norm_rows(x, norm, out, begin, end); });
}

void add_bias_residual_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                            const ops::LayerNormWeights& norm, Tensor& sum, Tensor& out) {
  // A part's sums, then their norms, while its rows are still in cache: each the two ops' own row code.
  parallel_for(x.dim(0), kRowsPerPart, [&](int64_t begin, int64_t end) {
    add_bias_residual_rows(x, bias, residual, sum, begin, end);
    layer_norm_rows(sum, norm, out, begin, end);
  });
}

}  // namespace seqtrans::cpu
