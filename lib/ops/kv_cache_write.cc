#include "core/profiler.h"
#include "ops/dispatch.h"

namespace seqtrans::ops {

void kv_cache_write(Tensor& cache, const Tensor& values, const Tensor& positions) {
  check_rank("kv_cache_write", "cache", cache, 3);
  check_rank("kv_cache_write", "values", values, 2);
  check_extent("kv_cache_write", "values", values, 0, cache.dim(0));
  check_extent("kv_cache_write", "values", values, 1, cache.dim(2));
  SEQTRANS_CHECK(values.dtype() == cache.dtype(), "kv_cache_write: values are {} but the cache is {}",
                 dtype_name(values.dtype()), dtype_name(cache.dtype()));
  check_rank("kv_cache_write", "positions", positions, 1);
  check_dtype("kv_cache_write", "positions", positions, DataType::I32);
  check_extent("kv_cache_write", "positions", positions, 0, cache.dim(0));
  check_same_device("kv_cache_write", cache, values);
  const ProfileScope profile("other kernels");
  switch (cache.device()) {
    case Device::CPU: cpu::kv_cache_write(cache, values, positions); break;
    case Device::CUDA: SEQTRANS_ON_CUDA(kv_cache_write, cache, values, positions); break;
  }
}

}  // namespace seqtrans::ops
