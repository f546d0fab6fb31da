#include <algorithm>
#include <cstring>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void copy_row_prefixes(const Tensor& src, const Tensor* index, const Tensor& lengths, Tensor& dst) {
  const int64_t rows = lengths.dim(0);
  if (rows == 0 || src.bytes() == 0 || dst.bytes() == 0) return;
  const size_t position_bytes = src.bytes() / static_cast<size_t>(src.dim(0) * src.dim(1));
  const size_t src_row_bytes = position_bytes * static_cast<size_t>(src.dim(1));
  const size_t dst_row_bytes = position_bytes * static_cast<size_t>(dst.dim(1));
  const int64_t longest = std::min(src.dim(1), dst.dim(1));
  const int32_t* length = lengths.data<int32_t>();
  const char* in = static_cast<const char*>(src.raw());
  char* out = static_cast<char*>(dst.raw());
  for (int64_t i = 0; i < rows; ++i) {
    const int64_t from = index != nullptr ? index->data<int32_t>()[i] : i;
    SEQTRANS_CHECK(from >= 0 && from < src.dim(0), "copy_row_prefixes: row {} of {}", from, src.dim(0));
    SEQTRANS_CHECK(length[i] >= 0 && length[i] <= longest, "copy_row_prefixes: {} positions of {}", length[i], longest);
    std::memcpy(out + static_cast<size_t>(i) * dst_row_bytes, in + static_cast<size_t>(from) * src_row_bytes,
                static_cast<size_t>(length[i]) * position_bytes);
  }
}

}  // namespace seqtrans::cpu
