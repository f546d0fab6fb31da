// embed: out[i, :] = table[ids[i], :] * scale + position encoding (Marian split sinusoid or learned).
#include "cuda/kernels/common.cuh"
#include "cuda/kernels/cuda_ops.h"

namespace seqtrans::cuda {
namespace {

// Same formula as cpu::sinusoidal_position, in double like the reference and Hugging Face's numpy table,
// so both round to the same float.
__device__ __forceinline__ float sinusoidal_position(int64_t position, int64_t channel, int64_t width) {
  const int64_t half = (width + 1) / 2;
  const bool is_sin = channel < half;
  const int64_t pair = is_sin ? channel : channel - half;
  const double angle = static_cast<double>(position) / pow(10000.0, 2.0 * pair / static_cast<double>(width));
  return static_cast<float>(is_sin ? sin(angle) : cos(angle));
}

template <typename T>
struct EmbedArguments {
  const int32_t* ids;        // [count]
  const int32_t* positions;  // [count]
  const T* table;            // [vocab, width]
  const T* position_table;   // [max_positions, width], learned positions only
  const float* sinusoids;    // [max_positions, width], sinusoidal positions precomputed, or null
  T* out;                    // [count, width]
  float scale;
  int64_t count, width, vocab, max_positions;
  int position_offset;  // added to every position
};

template <typename T, bool kLearned>
__global__ void embed_kernel(EmbedArguments<T> args) {
  start_after_inputs();
  const int32_t* __restrict__ ids = args.ids;
  const int32_t* __restrict__ positions = args.positions;
  const T* __restrict__ table = args.table;
  const T* __restrict__ position_table = args.position_table;
  const float* __restrict__ sinusoids = args.sinusoids;
  T* __restrict__ out = args.out;
  const float scale = args.scale;
  const int64_t count = args.count, width = args.width, vocab = args.vocab, max_positions = args.max_positions;
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < count * width;
       i += int64_t{gridDim.x} * blockDim.x) {
    const int64_t row = i / width, channel = i % width;
    const int32_t id = ids[row];
    const int64_t position = static_cast<int64_t>(positions[row]) + args.position_offset;
    float value = 0.0f;
    if (id >= 0 && id < vocab) {
      value = to_float(table[id * width + channel]) * scale;
      if constexpr (kLearned) {
        value += position >= 0 && position < max_positions ? to_float(position_table[position * width + channel]) : 0.0f;
      } else if (sinusoids != nullptr && position >= 0 && position < max_positions) {
        value += sinusoids[position * width + channel];  // what sinusoidal_position gave when the table was made
      } else {
        value += sinusoidal_position(position, channel, width);
      }
    }
    out[i] = from_float<T>(value);
  }
}

template <typename T>
void launch_embed(const Tensor& ids, const Tensor& positions, const Tensor& table,
                  const ops::EmbeddingOptions& options, Tensor& out, cudaStream_t stream) {
  constexpr int kThreads = 256;
  const int64_t count = ids.dim(0), width = table.dim(1), vocab = table.dim(0);
  if (count == 0 || width == 0) return;
  const unsigned blocks = grid_size(count * width, kThreads);
  const bool learned = options.positions == PositionEncoding::Learned;
  EmbedArguments<T> args{ids.data<int32_t>(), positions.data<int32_t>(), table.data<T>(), nullptr, nullptr,
                         out.data<T>(), options.scale, count, width, vocab, 0, options.position_offset};
  if (learned) {
    args.position_table = options.position_table->data<T>();
    args.max_positions = options.position_table->dim(0);
    launch_kernel(embed_kernel<T, true>, blocks, kThreads, 0, stream, args);
  } else {
    if (options.sinusoid_table != nullptr) {
      args.sinusoids = options.sinusoid_table->data<float>();
      args.max_positions = options.sinusoid_table->dim(0);
    }
    launch_kernel(embed_kernel<T, false>, blocks, kThreads, 0, stream, args);
  }
}

__global__ void sinusoid_table_kernel(float* __restrict__ out, int64_t positions, int64_t width) {
  start_after_inputs();
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < positions * width;
       i += int64_t{gridDim.x} * blockDim.x)
    out[i] = sinusoidal_position(i / width, i % width, width);
}

}  // namespace

void sinusoid_table(Tensor& out, cudaStream_t stream) {
  check_on_device("sinusoid_table", "out", out);
  const int64_t positions = out.dim(0), width = out.dim(1);
  if (positions * width == 0) return;
  constexpr int kThreads = 256;
  launch_kernel(sinusoid_table_kernel, grid_size(positions * width, kThreads), kThreads, 0, stream, out.data<float>(),
                positions, width);
}

void embed(const Tensor& ids, const Tensor& positions, const Tensor& table, const ops::EmbeddingOptions& options,
           Tensor& out, cudaStream_t stream) {
  const char* op = "embed";
  check_on_device(op, "ids", ids);
  check_on_device(op, "positions", positions);
  check_on_device(op, "table", table);
  check_same_dtype(op, "out", out, table.dtype());
  if (options.positions == PositionEncoding::Learned) {
    check_on_device(op, "position table", *options.position_table);
    check_same_dtype(op, "position table", *options.position_table, table.dtype());
  }
  if (table.dtype() == DataType::F16)
    launch_embed<__half>(ids, positions, table, options, out, stream);
  else
    launch_embed<float>(ids, positions, table, options, out, stream);
}

}  // namespace seqtrans::cuda
