#include <cstring>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void copy_prefix(const Tensor& src, Tensor& dst) {
  const int64_t rows = src.dim(0);
  if (rows == 0 || src.bytes() == 0) return;
  const size_t src_row_bytes = src.bytes() / static_cast<size_t>(rows);
  const size_t dst_row_bytes = dst.bytes() / static_cast<size_t>(rows);
  const char* in = static_cast<const char*>(src.raw());
  char* out = static_cast<char*>(dst.raw());
  for (int64_t i = 0; i < rows; ++i)
    std::memcpy(out + static_cast<size_t>(i) * dst_row_bytes, in + static_cast<size_t>(i) * src_row_bytes,
                src_row_bytes);
}

void fill_zero(Tensor& t) {
  if (t.bytes() > 0) std::memset(t.raw(), 0, t.bytes());
}

}  // namespace seqtrans::cpu
