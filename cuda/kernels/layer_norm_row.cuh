// One row of layer_norm as its kernels compute it (cuda/kernels/layer_norm.cu), shared with the small-rows
// product's layer-norm prologue (cuda/kernels/matmul.cu), which must give the op's bits: statistics two-pass
// in fp32, one warp per row, the row in registers.
#pragma once

#include "cuda/kernels/common.cuh"

namespace seqtrans::cuda {

// What the kernels normalize.
enum class RowInput {
  X,                // layer_norm: x
  BiasResidual,     // add_bias_residual_layer_norm (post-norm): x + bias + residual in fp32
  BiasResidualSum,  // add_bias_residual_norm (pre-norm): residual + (x + bias) rounded to T, written to sum
};

// The warp kernel's 16-byte vectors a lane (1, 2, 4 or 8) for rows of `row_vectors` vectors (at most 256):
// layer_norm's choice, which the small-rows product's layer-norm prologue takes too.
__host__ __device__ constexpr int layer_norm_lane_vectors(int row_vectors) {
  const int per_lane = (row_vectors + 31) / 32;
  return per_lane <= 1 ? 1 : per_lane <= 2 ? 2 : per_lane <= 4 ? 4 : 8;
}

// bias and residual are null for RowInput::X, sum unless RowInput::BiasResidualSum.
template <typename T>
struct LayerNormArguments {
  const T* x;         // [rows, width]
  const T* bias;      // [width]
  const T* residual;  // [rows, width]
  const T* gamma;     // [width]
  const T* beta;      // [width]
  T* sum;             // [rows, width]
  T* out;             // [rows, width]
  float epsilon;
  int rows;
  int width;
};

// Vector v of the row kInput names, as floats (RowInput::BiasResidualSum also writes it to the sum).
template <typename T, int N, RowInput kInput>
__device__ __forceinline__ void load_row_vector(const LayerNormArguments<T>& args, int64_t row_offset, int v,
                                                float (&element)[N]) {
  using V = Vector<T, N>;
  const V value = reinterpret_cast<const V*>(args.x + row_offset)[v];
  if constexpr (kInput == RowInput::X) {
#pragma unroll
    for (int e = 0; e < N; ++e) element[e] = to_float(value.value[e]);
  } else {
    const V shift = reinterpret_cast<const V*>(args.bias)[v];
    const V skip = reinterpret_cast<const V*>(args.residual + row_offset)[v];
    if constexpr (kInput == RowInput::BiasResidual) {
#pragma unroll
      for (int e = 0; e < N; ++e)
        element[e] = to_float(value.value[e]) + to_float(shift.value[e]) + to_float(skip.value[e]);
    } else {
      V sum;
#pragma unroll
      for (int e = 0; e < N; ++e) {
        sum.value[e] = add_bias_residual_element(value.value[e], shift.value[e], skip.value[e]);
        element[e] = to_float(sum.value[e]);
      }
      reinterpret_cast<V*>(args.sum + row_offset)[v] = sum;
    }
  }
}

// Vector v of the normalized row, (element - mean) * inverse_std * gamma + beta, given gamma's and beta's
// vector v.
template <typename T, int N>
__device__ __forceinline__ Vector<T, N> normalized_vector(const float (&element)[N], float mean, float inverse_std,
                                                          const Vector<T, N>& scale, const Vector<T, N>& offset) {
  Vector<T, N> result;
#pragma unroll
  for (int e = 0; e < N; ++e)
    result.value[e] =
        from_float<T>((element[e] - mean) * inverse_std * to_float(scale.value[e]) + to_float(offset.value[e]));
  return result;
}

// Writes vector v of the normalized row into out.
template <typename T, int N>
__device__ __forceinline__ void store_normalized_vector(const LayerNormArguments<T>& args, int64_t row_offset, int v,
                                                        const float (&element)[N], float mean, float inverse_std,
                                                        const Vector<T, N>& scale, const Vector<T, N>& offset) {
  reinterpret_cast<Vector<T, N>*>(args.out + row_offset)[v] = normalized_vector<T, N>(element, mean, inverse_std, scale, offset);
}

// A lane's elements of a row, element(i, e) as floats: x's own as loaded for RowInput::X (half the registers of
// floats in fp16; to_float is exact, so the arithmetic is the same), else the floats load_row_vector computes.
template <typename T, int N, int kVectors, RowInput kInput>
struct LaneElements {
  float values[kVectors][N];
  __device__ __forceinline__ void load(const LayerNormArguments<T>& args, int64_t row_offset, int v, int i) {
    load_row_vector<T, N, kInput>(args, row_offset, v, values[i]);
  }
  __device__ __forceinline__ float operator()(int i, int e) const { return values[i][e]; }
};

template <typename T, int N, int kVectors>
struct LaneElements<T, N, kVectors, RowInput::X> {
  Vector<T, N> raw[kVectors];
  __device__ __forceinline__ void load(const LayerNormArguments<T>& args, int64_t row_offset, int v, int i) {
    raw[i] = reinterpret_cast<const Vector<T, N>*>(args.x + row_offset)[v];
  }
  __device__ __forceinline__ float operator()(int i, int e) const { return to_float(raw[i].value[e]); }
};

// The row at row_offset normalized by one warp (lane: the thread's lane); store(v, vector) takes vector v of
// the result. kVectors: 16-byte vectors per lane (the row has at most 32 * kVectors of them); a larger kVectors
// than the row needs skips the same vectors, so the sums and the bits stay those of the smallest.
// kAffineAhead: gamma and beta are loaded with the row (the kernel, latency-bound) rather than at the store (a
// prologue, where their registers would be the product's); the values are the same either way.
template <typename T, int kVectors, RowInput kInput, bool kAffineAhead = true, typename Store>
__device__ __forceinline__ void layer_norm_row_in_warp(const LayerNormArguments<T>& args, int64_t row_offset, int lane,
                                                       Store&& store) {
  const int width = args.width;
  constexpr int N = kVectorWidth<T>;
  const int vectors = width / N;
  LaneElements<T, N, kVectors, kInput> element;
  // gamma and beta are loaded with the row, so that the store does not wait on one more round trip to memory
  // after the reductions (the kernel is latency-bound at decoder-step sizes).
  constexpr int kAffine = kAffineAhead ? kVectors : 1;
  Vector<T, N> scale[kAffine], offset[kAffine];
  const auto load_affine = [&](int i, int slot) {
    scale[slot] = reinterpret_cast<const Vector<T, N>*>(args.gamma)[lane + 32 * i];
    offset[slot] = reinterpret_cast<const Vector<T, N>*>(args.beta)[lane + 32 * i];
  };
  float sum = 0.0f;
#pragma unroll
  for (int i = 0; i < kVectors; ++i) {
    if (lane + 32 * i < vectors) {
      if constexpr (kAffineAhead) load_affine(i, i);
      element.load(args, row_offset, lane + 32 * i, i);
#pragma unroll
      for (int e = 0; e < N; ++e) sum += element(i, e);
    }
  }
  const float mean = warp_sum(sum) / static_cast<float>(width);
  float squares = 0.0f;
#pragma unroll
  for (int i = 0; i < kVectors; ++i)
    if (lane + 32 * i < vectors) {
#pragma unroll
      for (int e = 0; e < N; ++e) {
        const float centered = element(i, e) - mean;
        squares += centered * centered;
      }
    }
  const float inverse_std = 1.0f / sqrtf(warp_sum(squares) / static_cast<float>(width) + args.epsilon);
#pragma unroll
  for (int i = 0; i < kVectors; ++i)
    if (lane + 32 * i < vectors) {
      const int slot = kAffineAhead ? i : 0;
      if constexpr (!kAffineAhead) load_affine(i, slot);
      float row_values[N];
#pragma unroll
      for (int e = 0; e < N; ++e) row_values[e] = element(i, e);
      store(lane + 32 * i, normalized_vector<T, N>(row_values, mean, inverse_std, scale[slot], offset[slot]));
    }
}

}  // namespace seqtrans::cuda
