#include <cstring>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void copy(const Tensor& src, Tensor& dst) {
  if (src.bytes() == 0 || src.raw() == dst.raw()) return;
  std::memcpy(dst.raw(), src.raw(), src.bytes());
}

}  // namespace seqtrans::cpu
