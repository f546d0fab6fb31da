// add_bias_split: [m, parts * d] + bias, split into `parts` contiguous [m, d] tensors in one pass.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

constexpr int kMaxParts = 8;

template <typename T>
struct SplitOutputs {
  T* part[kMaxParts];
};

template <typename T, int N>
__global__ void add_bias_split_kernel(const T* __restrict__ x, const T* __restrict__ bias, SplitOutputs<T> outputs,
                                      int64_t vectors, int64_t part_vectors, int parts) {
  start_after_inputs();
  using V = Vector<T, N>;
  const int64_t row_vectors = part_vectors * parts;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < vectors; i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / row_vectors, column = i % row_vectors;
    const int part = static_cast<int>(column / part_vectors);
    V value = reinterpret_cast<const V*>(x)[i];
    const V shift = reinterpret_cast<const V*>(bias)[column];
#pragma unroll
    for (int j = 0; j < N; ++j) value.value[j] = from_float<T>(to_float(value.value[j]) + to_float(shift.value[j]));
    reinterpret_cast<V*>(outputs.part[part])[row * part_vectors + column % part_vectors] = value;
  }
}

template <typename T>
void launch_add_bias_split(const Tensor& x, const Tensor& bias, std::vector<Tensor>& parts, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t count = x.elements();
  if (count == 0) return;
  const int64_t part_width = x.dim(1) / static_cast<int64_t>(parts.size());
  SplitOutputs<T> outputs{};
  bool aligned = is_aligned(x.raw(), 16) && is_aligned(bias.raw(), 16);
  for (size_t i = 0; i < parts.size(); ++i) {
    outputs.part[i] = parts[i].data<T>();
    aligned = aligned && is_aligned(outputs.part[i], 16);
  }
  const int count_parts = static_cast<int>(parts.size());
  if (part_width % kWidth == 0 && aligned) {
    launch_kernel(add_bias_split_kernel<T, kWidth>, grid_size(count / kWidth, kThreads), kThreads, 0, stream,
                  x.data<T>(), bias.data<T>(), outputs, count / kWidth, part_width / kWidth, count_parts);
  } else {
    launch_kernel(add_bias_split_kernel<T, 1>, grid_size(count, kThreads), kThreads, 0, stream, x.data<T>(),
                  bias.data<T>(), outputs, count, part_width, count_parts);
  }
}

}  // namespace

void add_bias_split(const Tensor& x, const Tensor& bias, std::vector<Tensor>& parts, cudaStream_t stream) {
  const char* op = "add_bias_split";
  check_on_device(op, "x", x);
  check_on_device(op, "bias", bias);
  check_same_dtype(op, "bias", bias, x.dtype());
  SEQTRANS_CHECK(!parts.empty() && parts.size() <= kMaxParts, "{}: {} parts, the CUDA kernel takes 1 to {}", op,
                 parts.size(), kMaxParts);
  for (const Tensor& part : parts) {
    check_on_device(op, "part", part);
    check_same_dtype(op, "part", part, x.dtype());
  }
  if (x.dtype() == DataType::F16)
    launch_add_bias_split<__half>(x, bias, parts, stream);
  else
    launch_add_bias_split<float>(x, bias, parts, stream);
}

}  // namespace seqtrans::cuda
