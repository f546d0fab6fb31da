// copy_row_prefixes: dst[i, :lengths[i], ...] = src[index[i] (or i), :lengths[i], ...], one block per row,
// in the widest unit the sizes and alignment allow. Lengths and index are read on the device, so a graph
// replays it for whatever occupies the rows; an index or length out of range copies nothing (the CPU op
// refuses it).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

struct RowPrefixes {
  const int32_t* index;  // or null
  const int32_t* lengths;
  int64_t src_rows;
  int64_t longest;  // positions both rows hold
  int64_t src_row_units, dst_row_units, position_units;
};

template <typename Unit>
__global__ void copy_row_prefixes_kernel(const Unit* __restrict__ src, Unit* __restrict__ dst, RowPrefixes rows) {
  start_after_inputs();
  const int64_t row = blockIdx.x;
  const int64_t from = rows.index != nullptr ? rows.index[row] : row;
  const int64_t length = rows.lengths[row];
  if (from < 0 || from >= rows.src_rows || length <= 0 || length > rows.longest) return;
  const Unit* in = src + from * rows.src_row_units;
  Unit* out = dst + row * rows.dst_row_units;
  const int64_t units = length * rows.position_units;
  for (int64_t u = threadIdx.x; u < units; u += blockDim.x) out[u] = in[u];
}

template <typename Unit>
void launch(const Tensor& src, const Tensor* index, const Tensor& lengths, Tensor& dst, size_t position_bytes,
            cudaStream_t stream) {
  constexpr int kThreads = 128;
  RowPrefixes rows;
  rows.index = index != nullptr ? index->data<int32_t>() : nullptr;
  rows.lengths = lengths.data<int32_t>();
  rows.src_rows = src.dim(0);
  rows.longest = std::min(src.dim(1), dst.dim(1));
  rows.position_units = static_cast<int64_t>(position_bytes / sizeof(Unit));
  rows.src_row_units = rows.position_units * src.dim(1);
  rows.dst_row_units = rows.position_units * dst.dim(1);
  launch_kernel(copy_row_prefixes_kernel<Unit>, static_cast<unsigned>(lengths.dim(0)), kThreads, 0, stream,
                static_cast<const Unit*>(src.raw()), static_cast<Unit*>(dst.raw()), rows);
}

}  // namespace

void copy_row_prefixes(const Tensor& src, const Tensor* index, const Tensor& lengths, Tensor& dst,
                       cudaStream_t stream) {
  const char* op = "copy_row_prefixes";
  check_on_device(op, "src", src);
  check_on_device(op, "lengths", lengths);
  check_on_device(op, "dst", dst);
  if (index != nullptr) check_on_device(op, "index", *index);
  if (lengths.dim(0) == 0 || src.bytes() == 0 || dst.bytes() == 0) return;
  SEQTRANS_CHECK(lengths.dim(0) <= context().properties.maxGridSize[0], "{}: {} rows exceed the grid limit", op,
                 lengths.dim(0));
  const size_t position_bytes = src.bytes() / static_cast<size_t>(src.dim(0) * src.dim(1));
  launch_in_widest_unit({position_bytes}, {src.raw(), dst.raw()}, [&](auto unit) {
    launch<decltype(unit)>(src, index, lengths, dst, position_bytes, stream);
  });
}

}  // namespace seqtrans::cuda
