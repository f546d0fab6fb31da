// apply_rotary_embedding: one thread per N pairs (channel i, channel i + head_dim / 2) of a query or key head,
// in place. Each product and each sum is rounded to T on its own (no fused multiply-add), as Hugging Face's
// q * cos + rotate_half(q) * sin rounds in its separate kernels: fp32 and fp16 give HF's bits.
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

struct RotaryArguments {
  int64_t units;         // tokens * rotated heads * pair vectors
  int64_t row_width;     // of a qkv row
  int rotated_heads;     // query heads and kv heads
  int head_dim;
  int pair_vectors;      // vectors of N pairs in a head
  int table_positions;
};

template <typename T, int N>
__global__ void rotary_embedding_kernel(T* __restrict__ qkv, const int32_t* __restrict__ positions,
                                        const float* __restrict__ table, RotaryArguments args) {
  start_after_inputs();
  using V = Vector<T, N>;
  const int half = args.head_dim / 2;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < args.units;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t token = i / (int64_t{args.rotated_heads} * args.pair_vectors);
    const int head = static_cast<int>(i / args.pair_vectors % args.rotated_heads);
    const int v = static_cast<int>(i % args.pair_vectors);
    const int32_t position = positions[token];
    if (position < 0 || position >= args.table_positions) continue;
    T* first = qkv + token * args.row_width + static_cast<int64_t>(head) * args.head_dim;
    V x1 = reinterpret_cast<const V*>(first)[v], x2 = reinterpret_cast<const V*>(first + half)[v];
    const float* cos = table + static_cast<int64_t>(position) * args.head_dim + v * N;
    const float* sin = cos + half;
#pragma unroll
    for (int e = 0; e < N; ++e) {
      const float a = to_float(x1.value[e]), b = to_float(x2.value[e]);
      x1.value[e] = rotated_first<T>(a, b, cos[e], sin[e]);
      x2.value[e] = rotated_second<T>(a, b, cos[e], sin[e]);
    }
    reinterpret_cast<V*>(first)[v] = x1;
    reinterpret_cast<V*>(first + half)[v] = x2;
  }
}

template <typename T>
void launch_rotary_embedding(Tensor& qkv, const Tensor& positions, const Tensor& table,
                             const ops::RotaryShape& shape, cudaStream_t stream) {
  constexpr int kThreads = 256;
  constexpr int kWidth = kVectorWidth<T>;
  const int64_t head_dim = table.dim(1), half = head_dim / 2;
  const int rotated_heads = shape.num_heads + shape.num_kv_heads;
  // N pairs at once where a half head is whole vectors (then every half starts on a 16-byte boundary).
  const int n = half % kWidth == 0 && is_aligned(qkv.raw(), 16) ? kWidth : 1;
  RotaryArguments args;
  args.pair_vectors = static_cast<int>(half / n);
  args.units = qkv.dim(0) * rotated_heads * args.pair_vectors;
  args.row_width = qkv.dim(1);
  args.rotated_heads = rotated_heads;
  args.head_dim = static_cast<int>(head_dim);
  args.table_positions = static_cast<int>(table.dim(0));
  if (args.units == 0) return;
  if (n == kWidth)
    launch_kernel(rotary_embedding_kernel<T, kWidth>, grid_size(args.units, kThreads), kThreads, 0, stream,
                  qkv.data<T>(), positions.data<int32_t>(), table.data<float>(), args);
  else
    launch_kernel(rotary_embedding_kernel<T, 1>, grid_size(args.units, kThreads), kThreads, 0, stream, qkv.data<T>(),
                  positions.data<int32_t>(), table.data<float>(), args);
}

}  // namespace

void apply_rotary_embedding(Tensor& qkv, const Tensor& positions, const Tensor& table, const ops::RotaryShape& shape,
                            cudaStream_t stream) {
  const char* op = "apply_rotary_embedding";
  check_on_device(op, "qkv", qkv);
  check_on_device(op, "positions", positions);
  check_on_device(op, "table", table);
  SEQTRANS_CHECK(table.dim(0) <= INT32_MAX && table.dim(1) <= INT32_MAX, "{}: table {} exceeds the kernel's int", op,
                 shape_string(table.shape()));
  if (qkv.dtype() == DataType::F16)
    launch_rotary_embedding<__half>(qkv, positions, table, shape, stream);
  else
    launch_rotary_embedding<float>(qkv, positions, table, shape, stream);
}

}  // namespace seqtrans::cuda
