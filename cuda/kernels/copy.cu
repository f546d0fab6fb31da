// copy: dst = src on the device, queued on the stream (a CUDA graph captures it as a memcpy node).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {

void copy(const Tensor& src, Tensor& dst, cudaStream_t stream) {
  check_on_device("copy", "src", src);
  check_on_device("copy", "dst", dst);
  SEQTRANS_CHECK(src.bytes() == dst.bytes(), "copy: {} bytes into {}", src.bytes(), dst.bytes());
  if (src.bytes() == 0 || src.raw() == dst.raw()) return;
  CUDA_CHECK(cudaMemcpyAsync(dst.raw(), src.raw(), src.bytes(), cudaMemcpyDeviceToDevice, stream));
}

}  // namespace seqtrans::cuda
