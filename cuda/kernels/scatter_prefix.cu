// scatter_prefix: dst[rows[i], :m, ...] = src[i, :m, ...], any dtype, copied in the widest unit that the
// row sizes and alignment allow; one launch for every sentence a wave moves into the memory pool.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

template <typename Unit>
__global__ void scatter_prefix_kernel(const Unit* __restrict__ src, const int32_t* __restrict__ rows,
                                      Unit* __restrict__ dst, int64_t units, int64_t src_row_units,
                                      int64_t dst_row_units, int64_t dst_rows) {
  start_after_inputs();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < units; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / src_row_units, column = i % src_row_units;
    const int32_t target = rows[row];
    if (target >= 0 && target < dst_rows) dst[target * dst_row_units + column] = src[i];
  }
}

template <typename Unit>
void launch_scatter_prefix(const Tensor& src, const Tensor& rows, Tensor& dst, size_t src_row_bytes,
                           size_t dst_row_bytes, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t src_row_units = static_cast<int64_t>(src_row_bytes / sizeof(Unit));
  const int64_t units = src_row_units * src.dim(0);
  launch_kernel(scatter_prefix_kernel<Unit>, grid_size(units, kThreads), kThreads, 0, stream,
                static_cast<const Unit*>(src.raw()), rows.data<int32_t>(), static_cast<Unit*>(dst.raw()), units,
                src_row_units, static_cast<int64_t>(dst_row_bytes / sizeof(Unit)), dst.dim(0));
}

}  // namespace

void scatter_prefix(const Tensor& src, const Tensor& rows, Tensor& dst, cudaStream_t stream) {
  check_on_device("scatter_prefix", "src", src);
  check_on_device("scatter_prefix", "rows", rows);
  check_on_device("scatter_prefix", "dst", dst);
  if (src.dim(0) == 0 || src.bytes() == 0 || dst.dim(0) == 0) return;
  const size_t src_row_bytes = src.bytes() / static_cast<size_t>(src.dim(0));
  const size_t dst_row_bytes = dst.bytes() / static_cast<size_t>(dst.dim(0));
  launch_in_widest_unit({src_row_bytes, dst_row_bytes}, {src.raw(), dst.raw()}, [&](auto unit) {
    launch_scatter_prefix<decltype(unit)>(src, rows, dst, src_row_bytes, dst_row_bytes, stream);
  });
}

}  // namespace seqtrans::cuda
