// copy_prefix: the leading m rows-of-rows of src [n, m, ...] into dst [n, m', ...], as one strided copy
// whose pitches are the two row sizes (a CUDA graph captures it as a memcpy node).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {

void copy_prefix(const Tensor& src, Tensor& dst, cudaStream_t stream) {
  check_on_device("copy_prefix", "src", src);
  check_on_device("copy_prefix", "dst", dst);
  const int64_t rows = src.dim(0);
  if (rows == 0 || src.bytes() == 0) return;
  const size_t src_row_bytes = src.bytes() / static_cast<size_t>(rows);
  const size_t dst_row_bytes = dst.bytes() / static_cast<size_t>(rows);
  SEQTRANS_CHECK(dst.dim(0) == rows && src_row_bytes <= dst_row_bytes, "copy_prefix: rows of {} bytes into {}",
                 src_row_bytes, dst_row_bytes);
  char* out = static_cast<char*>(dst.raw());
  const char* in = static_cast<const char*>(src.raw());
  if (src_row_bytes == dst_row_bytes) {
    CUDA_CHECK(cudaMemcpyAsync(out, in, src.bytes(), cudaMemcpyDeviceToDevice, stream));
    return;
  }
  // cudaMemcpy2DAsync refuses pitches past the device's limit (about 2 GiB); such rows go one by one.
  if (dst_row_bytes <= context().properties.memPitch) {
    CUDA_CHECK(cudaMemcpy2DAsync(out, dst_row_bytes, in, src_row_bytes, src_row_bytes, static_cast<size_t>(rows),
                                 cudaMemcpyDeviceToDevice, stream));
    return;
  }
  for (size_t i = 0; i < static_cast<size_t>(rows); ++i)
    CUDA_CHECK(cudaMemcpyAsync(out + i * dst_row_bytes, in + i * src_row_bytes, src_row_bytes, cudaMemcpyDeviceToDevice,
                               stream));
}

void fill_zero(Tensor& t, cudaStream_t stream) {
  check_on_device("fill_zero", "t", t);
  if (t.bytes() > 0) CUDA_CHECK(cudaMemsetAsync(t.raw(), 0, t.bytes(), stream));
}

}  // namespace seqtrans::cuda
