// rms_norm and add_residual_rms_norm (Hugging Face's LlamaRMSNorm, lib/ops/ops.h): one block per row, the
// row in registers (up to kPerThread vectors a thread), the mean of squares in fp32 by one block reduction.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

constexpr int kMaxThreads = 1024;

template <typename T>
struct RmsNormArguments {
  const T* x;         // [rows, width]
  const T* residual;  // [rows, width], or null: no residual step
  const T* weight;    // [width]
  T* sum;             // [rows, width]: x + residual, written when there is a residual
  T* out;             // [rows, width]
  float epsilon;
  int width;
};

// kPerThread: vectors of the row a thread holds (the row has at most blockDim.x * kPerThread of them).
template <typename T, int N, int kPerThread>
__global__ void rms_norm_kernel(RmsNormArguments<T> args) {
  start_after_inputs();
  using V = Vector<T, N>;
  __shared__ float scratch[32];
  const int64_t row_offset = static_cast<int64_t>(blockIdx.x) * args.width;
  const int vectors = args.width / N;
  float values[kPerThread][N];
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int v = threadIdx.x + i * blockDim.x;
    if (v >= vectors) continue;
    V x = reinterpret_cast<const V*>(args.x + row_offset)[v];
    if (args.residual != nullptr) {
      const V skip = reinterpret_cast<const V*>(args.residual + row_offset)[v];
#pragma unroll
      for (int e = 0; e < N; ++e) x.value[e] = residual_sum_element(x.value[e], skip.value[e]);
      reinterpret_cast<V*>(args.sum + row_offset)[v] = x;
    }
#pragma unroll
    for (int e = 0; e < N; ++e) {
      values[i][e] = to_float(x.value[e]);
      squares += values[i][e] * values[i][e];
    }
  }
  const float inverse_rms = rsqrtf(block_sum(squares, scratch) / static_cast<float>(args.width) + args.epsilon);
#pragma unroll
  for (int i = 0; i < kPerThread; ++i) {
    const int v = threadIdx.x + i * blockDim.x;
    if (v >= vectors) continue;
    const V weight = reinterpret_cast<const V*>(args.weight)[v];
    V result;
#pragma unroll
    for (int e = 0; e < N; ++e) result.value[e] = rms_normed_element(values[i][e], inverse_rms, weight.value[e]);
    reinterpret_cast<V*>(args.out + row_offset)[v] = result;
  }
}

template <typename T, int N>
void launch_rms_norm_with(const RmsNormArguments<T>& args, int64_t rows, cudaStream_t stream) {
  const int64_t vectors = args.width / N;
  // As few vectors a thread as a block of kMaxThreads allows: more threads share a long row's latency.
  const auto threads_for = [&](int per_thread) {
    return static_cast<int>(std::max<int64_t>(32, ((vectors + per_thread - 1) / per_thread + 31) / 32 * 32));
  };
  SEQTRANS_CHECK(vectors <= 8 * kMaxThreads, "rms_norm: width {} exceeds the kernel's {} vectors a row", args.width,
                 8 * kMaxThreads);
  const unsigned blocks = static_cast<unsigned>(rows);
  if (vectors <= kMaxThreads)
    launch_kernel(rms_norm_kernel<T, N, 1>, blocks, threads_for(1), 0, stream, args);
  else if (vectors <= 2 * kMaxThreads)
    launch_kernel(rms_norm_kernel<T, N, 2>, blocks, threads_for(2), 0, stream, args);
  else if (vectors <= 4 * kMaxThreads)
    launch_kernel(rms_norm_kernel<T, N, 4>, blocks, threads_for(4), 0, stream, args);
  else
    launch_kernel(rms_norm_kernel<T, N, 8>, blocks, threads_for(8), 0, stream, args);
}

template <typename T>
void launch_rms_norm(const Tensor& x, const Tensor* residual, const ops::RmsNormWeights& norm, Tensor* sum,
                     Tensor& out, cudaStream_t stream) {
  const int64_t rows = x.dim(0), width = x.dim(1);
  if (rows == 0 || width == 0) return;
  SEQTRANS_CHECK(rows <= context().properties.maxGridSize[0] && width <= INT32_MAX,
                 "rms_norm: {} rows of {} exceed the grid limits", rows, width);
  const RmsNormArguments<T> args{x.data<T>(),
                                 residual != nullptr ? residual->data<T>() : nullptr,
                                 norm.weight.data<T>(),
                                 sum != nullptr ? sum->data<T>() : nullptr,
                                 out.data<T>(),
                                 norm.epsilon,
                                 static_cast<int>(width)};
  constexpr int kWidth = kVectorWidth<T>;
  const bool vectorized = width % kWidth == 0 && is_aligned(args.x, 16) && is_aligned(args.residual, 16) &&
                          is_aligned(args.weight, 16) && is_aligned(args.sum, 16) && is_aligned(args.out, 16);
  if (vectorized) return launch_rms_norm_with<T, kWidth>(args, rows, stream);
  launch_rms_norm_with<T, 1>(args, rows, stream);
}

}  // namespace

void rms_norm(const Tensor& x, const Tensor* residual, const ops::RmsNormWeights& norm, Tensor* sum, Tensor& out,
              cudaStream_t stream) {
  const char* op = "rms_norm";
  check_on_device(op, "x", x);
  check_on_device(op, "weight", norm.weight);
  check_on_device(op, "out", out);
  check_same_dtype(op, "weight", norm.weight, x.dtype());
  check_same_dtype(op, "out", out, x.dtype());
  SEQTRANS_CHECK((residual == nullptr) == (sum == nullptr), "{}: a residual needs a sum to write, and only it", op);
  if (residual != nullptr) {
    check_on_device(op, "residual", *residual);
    check_on_device(op, "sum", *sum);
    check_same_dtype(op, "residual", *residual, x.dtype());
    check_same_dtype(op, "sum", *sum, x.dtype());
  }
  if (x.dtype() == DataType::F16)
    launch_rms_norm<__half>(x, residual, norm, sum, out, stream);
  else
    launch_rms_norm<float>(x, residual, norm, sum, out, stream);
}

}  // namespace seqtrans::cuda
