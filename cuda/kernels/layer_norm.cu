// layer_norm, add_bias_residual_layer_norm and add_bias_residual_norm, statistics two-pass in fp32. Rows of up
// to 256 16-byte vectors (d <= 2048 in fp16, 1024 in fp32): one warp per row, the row in registers, no block
// barrier. Wider or unaligned rows: one block per row, the row staged in shared memory.
// add_bias_residual_norm's kernel writes each element of the sum as add_bias_residual rounds it and normalizes
// the rounded row with layer_norm's code on the kernel layer_norm would take for that row, so both outputs
// are the two ops' bits.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"
#include "cuda/kernels/layer_norm_row.cuh"

namespace seqtrans::cuda {
namespace {

template <typename T, int N, RowInput kInput>
__global__ void layer_norm_kernel(LayerNormArguments<T> args) {
  start_after_inputs();
  const int width = args.width;
  extern __shared__ float row[];  // [width]
  __shared__ float scratch[32];
  const int64_t row_offset = static_cast<int64_t>(blockIdx.x) * width;
  const int vectors = width / N;

  float sum = 0.0f;
  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    float element[N];
    load_row_vector<T, N, kInput>(args, row_offset, v, element);
#pragma unroll
    for (int e = 0; e < N; ++e) {
      row[v * N + e] = element[e];
      sum += element[e];
    }
  }
  const float mean = block_sum(sum, scratch) / static_cast<float>(width);

  float squares = 0.0f;
  for (int i = threadIdx.x; i < width; i += blockDim.x) {
    const float centered = row[i] - mean;
    squares += centered * centered;
  }
  const float variance = block_sum(squares, scratch) / static_cast<float>(width);
  const float inverse_std = 1.0f / sqrtf(variance + args.epsilon);

  for (int v = threadIdx.x; v < vectors; v += blockDim.x) {
    float element[N];
#pragma unroll
    for (int e = 0; e < N; ++e) element[e] = row[v * N + e];
    store_normalized_vector<T, N>(args, row_offset, v, element, mean, inverse_std,
                                  reinterpret_cast<const Vector<T, N>*>(args.gamma)[v],
                                  reinterpret_cast<const Vector<T, N>*>(args.beta)[v]);
  }
}

// kVectors: 16-byte vectors per lane (the row has at most 32 * kVectors of them).
template <typename T, int kVectors, RowInput kInput>
__global__ void layer_norm_warp_kernel(LayerNormArguments<T> args) {
  start_after_inputs();
  const int row = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (row >= args.rows) return;  // the whole warp leaves together
  const int64_t row_offset = static_cast<int64_t>(row) * args.width;
  using V = Vector<T, kVectorWidth<T>>;
  layer_norm_row_in_warp<T, kVectors, kInput>(args, row_offset, lane, [&](int v, const V& value) {
    reinterpret_cast<V*>(args.out + row_offset)[v] = value;
  });
}

template <typename T, int kVectors, RowInput kInput>
void launch_layer_norm_warp(const LayerNormArguments<T>& args, cudaStream_t stream) {
  constexpr int kThreads = 128;
  const unsigned blocks = static_cast<unsigned>((args.rows + kThreads / 32 - 1) / (kThreads / 32));
  launch_kernel(layer_norm_warp_kernel<T, kVectors, kInput>, blocks, kThreads, 0, stream, args);
}

// The kernels' arguments; bias, residual and sum may be null (RowInput says which a kernel reads).
template <typename T>
LayerNormArguments<T> layer_norm_arguments(const Tensor& x, const Tensor* bias, const Tensor* residual,
                                           const ops::LayerNormWeights& norm, Tensor* sum, Tensor& out) {
  LayerNormArguments<T> args;
  args.x = x.data<T>();
  args.bias = bias != nullptr ? bias->data<T>() : nullptr;
  args.residual = residual != nullptr ? residual->data<T>() : nullptr;
  args.gamma = norm.gamma.data<T>();
  args.beta = norm.beta.data<T>();
  args.sum = sum != nullptr ? sum->data<T>() : nullptr;
  args.out = out.data<T>();
  args.epsilon = norm.epsilon;
  args.rows = static_cast<int>(x.dim(0));
  args.width = static_cast<int>(x.dim(1));
  return args;
}

// Whether the kernels move the rows in 16-byte vectors: a whole number of them a row, every operand aligned.
// Which kernel runs, and so the order of the row's sums, follows from it and the width alone.
template <typename T>
bool vectorized(const LayerNormArguments<T>& args) {
  return args.width % kVectorWidth<T> == 0 && is_aligned(args.x, 16) && is_aligned(args.bias, 16) &&
         is_aligned(args.residual, 16) && is_aligned(args.gamma, 16) && is_aligned(args.beta, 16) &&
         is_aligned(args.sum, 16) && is_aligned(args.out, 16);
}

template <typename T, RowInput kInput>
void launch_layer_norm(const LayerNormArguments<T>& args, cudaStream_t stream) {
  const int rows = args.rows, width = args.width;
  if (rows == 0 || width == 0) return;
  const size_t shared_bytes = sizeof(float) * static_cast<size_t>(width);
  SEQTRANS_CHECK(shared_bytes <= context().properties.sharedMemPerBlock,
                 "layer_norm: width {} exceeds the {} bytes of shared memory a block has", width,
                 context().properties.sharedMemPerBlock);
  constexpr int kWidth = kVectorWidth<T>;
  const bool in_vectors = vectorized(args);
  if (in_vectors && width / kWidth <= 256) {
    switch (layer_norm_lane_vectors(width / kWidth)) {
      case 1: return launch_layer_norm_warp<T, 1, kInput>(args, stream);
      case 2: return launch_layer_norm_warp<T, 2, kInput>(args, stream);
      case 4: return launch_layer_norm_warp<T, 4, kInput>(args, stream);
      default: return launch_layer_norm_warp<T, 8, kInput>(args, stream);
    }
  }
  const int vector_width = in_vectors ? kWidth : 1;
  const int max_threads = std::min(1024, context().properties.maxThreadsPerBlock);
  const int threads = std::clamp((width / vector_width + 31) / 32 * 32, 32, max_threads);
  const unsigned blocks = static_cast<unsigned>(rows);
  if (in_vectors)
    launch_kernel(layer_norm_kernel<T, kWidth, kInput>, blocks, threads, shared_bytes, stream, args);
  else
    launch_kernel(layer_norm_kernel<T, 1, kInput>, blocks, threads, shared_bytes, stream, args);
}

// The kernel of kInput on these operands (as layer_norm_arguments takes them), in x's dtype.
template <RowInput kInput>
void run_layer_norm(const Tensor& x, const Tensor* bias, const Tensor* residual, const ops::LayerNormWeights& norm,
                    Tensor* sum, Tensor& out, cudaStream_t stream) {
  if (x.dtype() == DataType::F16)
    launch_layer_norm<__half, kInput>(layer_norm_arguments<__half>(x, bias, residual, norm, sum, out), stream);
  else
    launch_layer_norm<float, kInput>(layer_norm_arguments<float>(x, bias, residual, norm, sum, out), stream);
}

// Whether add_bias_residual_norm's kernel reads its row as layer_norm(sum) would: layer_norm moves the sum in
// vectors where it, out, gamma and beta are aligned; the fused kernel needs x, bias and residual aligned too.
template <typename T>
bool fused_reads_as_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                               const ops::LayerNormWeights& norm, Tensor& sum, Tensor& out) {
  return vectorized(layer_norm_arguments<T>(x, &bias, &residual, norm, &sum, out)) ==
         vectorized(layer_norm_arguments<T>(sum, nullptr, nullptr, norm, nullptr, out));
}

void check_norm(const char* op, const Tensor& x, const ops::LayerNormWeights& norm, const Tensor& out) {
  check_on_device(op, "x", x);
  check_on_device(op, "gamma", norm.gamma);
  check_on_device(op, "beta", norm.beta);
  check_same_dtype(op, "gamma", norm.gamma, x.dtype());
  check_same_dtype(op, "beta", norm.beta, x.dtype());
  check_same_dtype(op, "out", out, x.dtype());
  SEQTRANS_CHECK(x.dim(0) <= context().properties.maxGridSize[0], "{}: {} rows exceed the grid limit", op, x.dim(0));
}

void check_bias_residual(const char* op, const Tensor& x, const Tensor& bias, const Tensor& residual) {
  check_on_device(op, "bias", bias);
  check_on_device(op, "residual", residual);
  check_same_dtype(op, "bias", bias, x.dtype());
  check_same_dtype(op, "residual", residual, x.dtype());
}

}  // namespace

void add_bias_residual_layer_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                                  const ops::LayerNormWeights& norm, Tensor& out, cudaStream_t stream) {
  const char* op = "add_bias_residual_layer_norm";
  check_norm(op, x, norm, out);
  check_bias_residual(op, x, bias, residual);
  run_layer_norm<RowInput::BiasResidual>(x, &bias, &residual, norm, nullptr, out, stream);
}

void layer_norm(const Tensor& x, const ops::LayerNormWeights& norm, Tensor& out, cudaStream_t stream) {
  check_norm("layer_norm", x, norm, out);
  run_layer_norm<RowInput::X>(x, nullptr, nullptr, norm, nullptr, out, stream);
}

void add_bias_residual_norm(const Tensor& x, const Tensor& bias, const Tensor& residual,
                            const ops::LayerNormWeights& norm, Tensor& sum, Tensor& out, cudaStream_t stream) {
  const char* op = "add_bias_residual_norm";
  check_norm(op, x, norm, out);
  check_bias_residual(op, x, bias, residual);
  check_on_device(op, "sum", sum);
  check_same_dtype(op, "sum", sum, x.dtype());
  const bool fusable = x.dtype() == DataType::F16 ? fused_reads_as_layer_norm<__half>(x, bias, residual, norm, sum, out)
                                                  : fused_reads_as_layer_norm<float>(x, bias, residual, norm, sum, out);
  if (!fusable) {  // the same kernel for the norm, and so the same order of its sums, as the two ops take
    add_bias_residual(x, bias, residual, sum, stream);
    layer_norm(sum, norm, out, stream);
    return;
  }
  run_layer_norm<RowInput::BiasResidualSum>(x, &bias, &residual, norm, &sum, out, stream);
}

}  // namespace seqtrans::cuda
