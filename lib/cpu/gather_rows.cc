#include <cstring>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out) {
  const int64_t rows = x.dim(0);
  const size_t row_bytes = rows == 0 ? 0 : x.bytes() / static_cast<size_t>(rows);
  const int32_t* index = indices.data<int32_t>();
  const char* in = static_cast<const char*>(x.raw());
  char* result = static_cast<char*>(out.raw());
  for (int64_t i = 0; i < indices.dim(0); ++i) {
    SEQTRANS_CHECK(index[i] >= 0 && index[i] < rows, "gather_rows: index {} outside {} rows", index[i], rows);
    std::memcpy(result + i * row_bytes, in + static_cast<size_t>(index[i]) * row_bytes, row_bytes);
  }
}

void copy_with_fed_ids(const Tensor& source, int64_t fed, const Tensor* chosen, Tensor& destination) {
  const int32_t* in = source.data<int32_t>();
  int32_t* out = destination.data<int32_t>();
  const int64_t rows = chosen ? chosen->dim(0) : 0, stride = chosen && chosen->rank() == 2 ? chosen->dim(1) : 1;
  for (int64_t i = 0; i < source.dim(0); ++i) {
    const int64_t row = -static_cast<int64_t>(in[i]) - 1;
    out[i] = i < fed && row >= 0 && row < rows ? chosen->data<int32_t>()[row * stride] : in[i];
  }
}

}  // namespace seqtrans::cpu
