// gather_rows: out[i] = x[indices[i]] along the first axis, any dtype, copied in the widest unit the row
// size and alignment allow; copy_with_fed_ids: decoder inputs, some fed the previous step's chosen tokens.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

template <typename Unit>
__global__ void gather_rows_kernel(const Unit* __restrict__ x, const int32_t* __restrict__ indices,
                                   Unit* __restrict__ out, int64_t units, int64_t row_units, int64_t rows) {
  start_after_inputs();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < units; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / row_units, column = i % row_units;
    const int32_t source = indices[row];
    out[i] = source >= 0 && source < rows ? x[source * row_units + column] : Unit{};
  }
}

template <typename Unit>
void launch_gather_rows(const Tensor& x, const Tensor& indices, Tensor& out, size_t row_bytes, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t row_units = static_cast<int64_t>(row_bytes / sizeof(Unit));
  const int64_t units = row_units * indices.dim(0);
  launch_kernel(gather_rows_kernel<Unit>, grid_size(units, kThreads), kThreads, 0, stream,
                static_cast<const Unit*>(x.raw()), indices.data<int32_t>(), static_cast<Unit*>(out.raw()), units,
                row_units, x.dim(0));
}

__global__ void copy_with_fed_ids_kernel(const int32_t* __restrict__ source, int64_t n, int64_t fed,
                                         const int32_t* __restrict__ chosen, int64_t rows, int64_t stride,
                                         int32_t* __restrict__ destination) {
  start_after_inputs();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const int32_t value = source[i];
    const int64_t row = -static_cast<int64_t>(value) - 1;
    destination[i] = i < fed && row >= 0 && row < rows ? chosen[row * stride] : value;
  }
}

}  // namespace

void copy_with_fed_ids(const Tensor& source, int64_t fed, const Tensor* chosen, Tensor& destination,
                       cudaStream_t stream) {
  check_on_device("copy_with_fed_ids", "source", source);
  check_on_device("copy_with_fed_ids", "destination", destination);
  constexpr int kThreads = 256;
  const int64_t n = source.dim(0);
  const int64_t rows = chosen ? chosen->dim(0) : 0, stride = chosen && chosen->rank() == 2 ? chosen->dim(1) : 1;
  launch_kernel(copy_with_fed_ids_kernel, grid_size(n, kThreads), kThreads, 0, stream, source.data<int32_t>(), n,
                chosen ? fed : 0, chosen ? chosen->data<int32_t>() : nullptr, rows, stride,
                destination.data<int32_t>());
}

void gather_rows(const Tensor& x, const Tensor& indices, Tensor& out, cudaStream_t stream) {
  check_on_device("gather_rows", "x", x);
  check_on_device("gather_rows", "indices", indices);
  const int64_t rows = x.dim(0);
  if (indices.dim(0) == 0) return;
  const size_t row_bytes = rows == 0 ? 0 : x.bytes() / static_cast<size_t>(rows);
  if (row_bytes == 0) return;
  launch_in_widest_unit({row_bytes}, {x.raw(), out.raw()}, [&](auto unit) {
    launch_gather_rows<decltype(unit)>(x, indices, out, row_bytes, stream);
  });
}

}  // namespace seqtrans::cuda
