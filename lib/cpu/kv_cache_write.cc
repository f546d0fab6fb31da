#include <cstring>

#include "cpu/cpu_ops.h"

namespace seqtrans::cpu {

void kv_cache_write(Tensor& cache, const Tensor& values, const Tensor& positions) {
  const int64_t slots = cache.dim(0), capacity = cache.dim(1), width = cache.dim(2);
  const int32_t* position = positions.data<int32_t>();
  for (int64_t s = 0; s < slots; ++s) {
    SEQTRANS_CHECK(position[s] >= 0 && position[s] < capacity, "kv_cache_write: position {} outside capacity {}",
                   position[s], capacity);
    std::memcpy(cache.data<float>() + (s * capacity + position[s]) * width, values.data<float>() + s * width,
                sizeof(float) * width);
  }
}

}  // namespace seqtrans::cpu
