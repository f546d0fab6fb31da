#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

namespace {

// Hugging Face Marian: channel j < ceil(width/2) is sin(pos / 10000^(2j/width)); channel half + j is
// cos(pos / 10000^(2j/width)). Computed in double, then rounded, like its numpy-built table.
bool sine_channel(int64_t channel, int64_t width) { return channel < (width + 1) / 2; }

// 10000^(2j/width), the divisor of `channel`'s angles.
double sinusoid_divisor(int64_t channel, int64_t width) {
  const int64_t pair = sine_channel(channel, width) ? channel : channel - (width + 1) / 2;
  return std::pow(10000.0, 2.0 * pair / static_cast<double>(width));
}

float sinusoid(int64_t position, double divisor, bool sine) {
  const double angle = static_cast<double>(position) / divisor;
  return static_cast<float>(sine ? std::sin(angle) : std::cos(angle));
}

}  // namespace

float sinusoidal_position(int64_t position, int64_t channel, int64_t width) {
  return sinusoid(position, sinusoid_divisor(channel, width), sine_channel(channel, width));
}

void embed(const Tensor& ids, const Tensor& positions, const Tensor& table, const ops::EmbeddingOptions& options,
           Tensor& out) {
  const int64_t count = ids.dim(0), width = table.dim(1), vocab = table.dim(0);
  const int32_t* token = ids.data<int32_t>();
  const int32_t* position = positions.data<int32_t>();
  const float* rows = table.data<float>();
  float* result = out.data<float>();
  for (int64_t i = 0; i < count; ++i) {
    SEQTRANS_CHECK(token[i] >= 0 && token[i] < vocab, "embed: token id {} outside the vocabulary of {}", token[i],
                   vocab);
    const int64_t at = static_cast<int64_t>(position[i]) + options.position_offset;
    const float* row = rows + static_cast<int64_t>(token[i]) * width;
    float* out_row = result + i * width;
    for (int64_t c = 0; c < width; ++c) out_row[c] = row[c] * options.scale;
    if (options.positions == PositionEncoding::Learned) {
      const Tensor& position_table = *options.position_table;
      SEQTRANS_CHECK(at >= 0 && at < position_table.dim(0), "embed: position {} past the model's {} positions", at,
                     position_table.dim(0));
      const float* position_row = position_table.data<float>() + at * width;
      for (int64_t c = 0; c < width; ++c) out_row[c] += position_row[c];
    } else if (options.sinusoid_table != nullptr && at >= 0 && at < options.sinusoid_table->dim(0)) {
      const float* position_row = options.sinusoid_table->data<float>() + at * width;
      for (int64_t c = 0; c < width; ++c) out_row[c] += position_row[c];
    } else {
      for (int64_t c = 0; c < width; ++c) out_row[c] += sinusoidal_position(at, c, width);
    }
  }
}

void fairseq_sinusoid_table(Tensor& out) {
  // Hugging Face M2M-100 (fairseq): frequencies exp(k * -(ln 10000 / (half - 1))) and angles position x
  // frequency, all in float as torch builds the table; sin in channels [0, half), cos in [half, 2 half), a
  // zero channel last when the width is odd. Row pad_id is zeroed there, but positions start past it.
  const int64_t positions = out.dim(0), width = out.dim(1), half = width / 2;
  const float step = static_cast<float>(std::log(10000.0) / static_cast<double>(std::max<int64_t>(half - 1, 1)));
  std::vector<float> frequencies(static_cast<size_t>(half));
  for (int64_t k = 0; k < half; ++k) frequencies[k] = std::exp(static_cast<float>(k) * -step);
  float* values = out.data<float>();
  for (int64_t p = 0; p < positions; ++p) {
    float* row = values + p * width;
    for (int64_t k = 0; k < half; ++k) {
      const float angle = static_cast<float>(p) * frequencies[k];
      row[k] = std::sin(angle);
      row[half + k] = std::cos(angle);
    }
    if (width % 2 == 1) row[width - 1] = 0.0f;
  }
}

void sinusoid_table(Tensor& out) {
  const int64_t positions = out.dim(0), width = out.dim(1);
  // A divisor per channel, not per entry: the same pow as sinusoidal_position's, width times instead of
  // positions x width (for the bundled model's 512 x 256 table that pow took 2-6 ms of its load).
  std::vector<double> divisors(static_cast<size_t>(width));
  for (int64_t c = 0; c < width; ++c) divisors[c] = sinusoid_divisor(c, width);
  float* values = out.data<float>();
  for (int64_t p = 0; p < positions; ++p)
    for (int64_t c = 0; c < width; ++c) values[p * width + c] = sinusoid(p, divisors[c], sine_channel(c, width));
}

}  // namespace seqtrans::cpu
