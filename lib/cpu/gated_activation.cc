#include <cmath>

#include "cpu/cpu_ops.h"
#include "cpu/thread_pool.h"

namespace seqtrans::cpu {
namespace {

// Rows a thread takes at least: an FFN row is thousands of exponentials.
constexpr int64_t kRowsPerPart = 4;

}  // namespace

void gated_activation(const Tensor& gate_up, Tensor& out) {
  const int64_t rows = out.dim(0), width = out.dim(1);
  const float* in = gate_up.data<float>();
  float* result = out.data<float>();
  parallel_for(rows, kRowsPerPart, [&](int64_t begin, int64_t end) {
    for (int64_t row = begin; row < end; ++row) {
      const float* gate = in + row * 2 * width;
      const float* up = gate + width;
      for (int64_t c = 0; c < width; ++c) result[row * width + c] = gate[c] / (1.0f + std::exp(-gate[c])) * up[c];
    }
  });
}

}  // namespace seqtrans::cpu
