#include <cstring>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void scatter_prefix(const Tensor& src, const Tensor& rows, Tensor& dst) {
  const int64_t count = src.dim(0), dst_rows = dst.dim(0);
  if (count == 0 || src.bytes() == 0) return;
  const int32_t* targets = rows.data<int32_t>();
  for (int64_t i = 0; i < count; ++i)
    SEQTRANS_CHECK(targets[i] >= 0 && targets[i] < dst_rows, "scatter_prefix: row {} is {}, outside the {} rows of dst",
                   i, targets[i], dst_rows);
  const size_t src_row_bytes = src.bytes() / static_cast<size_t>(count);
  const size_t dst_row_bytes = dst.bytes() / static_cast<size_t>(dst_rows);
  const char* in = static_cast<const char*>(src.raw());
  char* out = static_cast<char*>(dst.raw());
  for (int64_t i = 0; i < count; ++i)
    std::memcpy(out + static_cast<size_t>(targets[i]) * dst_row_bytes, in + static_cast<size_t>(i) * src_row_bytes,
                src_row_bytes);
}

}  // namespace seqtrans::cpu
