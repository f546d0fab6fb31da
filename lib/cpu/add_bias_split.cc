#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void add_bias_split(const Tensor& x, const Tensor& bias, std::vector<Tensor>& parts) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  const int64_t part_width = width / static_cast<int64_t>(parts.size());
  const float* in = x.data<float>();
  const float* b = bias.data<float>();
  for (size_t part = 0; part < parts.size(); ++part) {
    float* out = parts[part].data<float>();
    const int64_t column_offset = static_cast<int64_t>(part) * part_width;
    for (int64_t row = 0; row < rows; ++row)
      for (int64_t i = 0; i < part_width; ++i)
        out[row * part_width + i] = in[row * width + column_offset + i] + b[column_offset + i];
  }
}

}  // namespace seqtrans::cpu
