// Shared device helpers: fp16/fp32 conversion, warp and block reductions, vectorized loads, launch sizes.
#pragma once

#include <cuda_fp16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <initializer_list>

#include "core/tensor.h"
#include "cuda/kernels/launch.cuh"
#include "cuda/runtime/check.h"
#include "cuda/runtime/context.h"

namespace seqtrans::cuda {

// ---- element conversion (fp16 storage, fp32 arithmetic) ----

__device__ __forceinline__ float to_float(float x) { return x; }
__device__ __forceinline__ float to_float(__half x) { return __half2float(x); }

template <typename T>
__device__ __forceinline__ T from_float(float x);
template <>
__device__ __forceinline__ float from_float<float>(float x) {
  return x;
}
template <>
__device__ __forceinline__ __half from_float<__half>(float x) {
  return __float2half_rn(x);
}

// A pre-norm sublayer's output joining the residual stream, residual + (x + bias) rounded to T (Hugging Face's
// order: the projection with its bias first): add_bias_residual's element, and add_bias_residual_norm's sum.
template <typename T>
__device__ __forceinline__ T add_bias_residual_element(T x, T bias, T residual) {
  return from_float<T>(to_float(residual) + (to_float(x) + to_float(bias)));
}

// add_residual_rms_norm's sum element: x + residual rounded to T (HF adds in the model's dtype, then norms that).
template <typename T>
__device__ __forceinline__ T residual_sum_element(T x, T residual) {
  return from_float<T>(to_float(x) + to_float(residual));
}

// rms_norm's output element: the scaled value rounded to T, then the weight's product rounded to T (HF's
// x.to(input_dtype) before weight * x). rms_norm's kernel and the small-rows product's prologue both use it.
template <typename T>
__device__ __forceinline__ T rms_normed_element(float value, float inverse_rms, T weight) {
  return from_float<T>(to_float(weight) * to_float(from_float<T>(value * inverse_rms)));
}

// A rotary pair (x1 in a head's first half, x2 half a head later) at one position, rounded as HF's
// apply_rotary_pos_emb rounds in T: cos and sin to T, each product, then the sum. apply_rotary_embedding's
// kernel, append_self_attention_step's and the small-rows product's step epilogue all use these.
template <typename T>
__device__ __forceinline__ float rotary_product(float x, float factor) {
  return to_float(from_float<T>(__fmul_rn(x, to_float(from_float<T>(factor)))));
}
// x1 cos - x2 sin: the first half's element.
template <typename T>
__device__ __forceinline__ T rotated_first(float x1, float x2, float cos, float sin) {
  return from_float<T>(__fsub_rn(rotary_product<T>(x1, cos), rotary_product<T>(x2, sin)));
}
// x2 cos + x1 sin: the second half's element.
template <typename T>
__device__ __forceinline__ T rotated_second(float x1, float x2, float cos, float sin) {
  return from_float<T>(__fadd_rn(rotary_product<T>(x2, cos), rotary_product<T>(x1, sin)));
}

// ---- vectors: N elements moved as one aligned access (16 bytes for the widest) ----

template <typename T, int N>
struct alignas(sizeof(T) * N) Vector {
  T value[N];
};

// Elements of T in one 16-byte access.
template <typename T>
constexpr int kVectorWidth = 16 / sizeof(T);

inline bool is_aligned(const void* pointer, size_t bytes) {
  return reinterpret_cast<uintptr_t>(pointer) % bytes == 0;
}

// Calls launch(Unit{}) with the widest copy unit (uint4, uint32_t, else uint16_t) that divides every size
// in `bytes` and aligns every pointer: the byte-moving kernels (gathers, scatters, row copies) of any dtype.
template <typename Launch>
void launch_in_widest_unit(std::initializer_list<size_t> bytes, std::initializer_list<const void*> pointers,
                           Launch&& launch) {
  const auto fits = [&](size_t unit) {
    return std::all_of(bytes.begin(), bytes.end(), [&](size_t size) { return size % unit == 0; }) &&
           std::all_of(pointers.begin(), pointers.end(), [&](const void* pointer) { return is_aligned(pointer, unit); });
  };
  if (fits(16))
    launch(uint4{});
  else if (fits(4))
    launch(uint32_t{});
  else
    launch(uint16_t{});
}

// ---- tensor cores ----

// d (16 x 8, fp32) += a (16 x 16, fp16, by rows) x b (16 x 8, fp16, by columns): one mma.m16n8k16, its
// operands in PTX's fragment registers (a0-a3: rows lane / 4 and + 8 at inputs 2 (lane % 4) and + 8; b0-b1:
// column lane / 4 at the same inputs; d: rows lane / 4 and + 8, columns 2 (lane % 4) and + 1).
__device__ __forceinline__ void mma_m16n8k16(float (&d)[4], unsigned a0, unsigned a1, unsigned a2, unsigned a3,
                                             unsigned b0, unsigned b1) {
  asm volatile(
      "mma.sync.aligned.m16n8k16.row.col.f32.f16.f16.f32 {%0, %1, %2, %3}, {%4, %5, %6, %7}, {%8, %9}, "
      "{%0, %1, %2, %3};"
      : "+f"(d[0]), "+f"(d[1]), "+f"(d[2]), "+f"(d[3])
      : "r"(a0), "r"(a1), "r"(a2), "r"(a3), "r"(b0), "r"(b1));
}

__device__ __forceinline__ unsigned shared_address(const void* pointer) {
  return static_cast<unsigned>(__cvta_generic_to_shared(pointer));
}

// Four 8x8 matrices of 16-bit values from shared memory, lane l giving a row of matrix l / 8.
__device__ __forceinline__ void load_matrices(unsigned (&to)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(to[0]), "=r"(to[1]), "=r"(to[2]), "=r"(to[3])
               : "r"(shared_address(row))
               : "memory");
}

// Two 8x8 matrices, lanes 0-15 giving the rows.
__device__ __forceinline__ void load_matrices(unsigned (&to)[2], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x2.shared.b16 {%0, %1}, [%2];"
               : "=r"(to[0]), "=r"(to[1])
               : "r"(shared_address(row))
               : "memory");
}

// Four 8x8 matrices, each transposed on the way: from rows of a [k][n] matrix in shared memory, the b
// fragments of mma_m16n8k16 (matrix 0 and 1: keys 0-7 and 8-15 of n columns 0-7; 2 and 3: of columns 8-15).
__device__ __forceinline__ void load_matrices_transposed(unsigned (&to)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0, %1, %2, %3}, [%4];"
               : "=r"(to[0]), "=r"(to[1]), "=r"(to[2]), "=r"(to[3])
               : "r"(shared_address(row))
               : "memory");
}

// ---- asynchronous copies into shared memory (cp.async) ----

__device__ __forceinline__ void copy_async_16(void* shared, const void* global) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16;" ::"r"(shared_address(shared)), "l"(global) : "memory");
}

// 16 bytes, or 16 zeros where !valid (global is then not read, but must still be a valid address).
__device__ __forceinline__ void copy_async_16_or_zeros(void* shared, const void* global, bool valid) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;" ::"r"(shared_address(shared)), "l"(global),
               "r"(valid ? 16 : 0)
               : "memory");
}

__device__ __forceinline__ void wait_async_copies() { asm volatile("cp.async.wait_all;" ::: "memory"); }

// Groups of copies: commit closes the thread's copies issued since the last commit; wait_async_groups<n> waits
// until at most n of its groups are still in flight.
__device__ __forceinline__ void commit_async_copies() { asm volatile("cp.async.commit_group;" ::: "memory"); }

template <int kPending>
__device__ __forceinline__ void wait_async_groups() {
  asm volatile("cp.async.wait_group %0;" ::"n"(kPending) : "memory");
}

// ---- reductions ----

constexpr unsigned kFullMask = 0xffffffffu;

__device__ __forceinline__ float warp_sum(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value += __shfl_xor_sync(kFullMask, value, offset);
  return value;
}

__device__ __forceinline__ float warp_max(float value) {
#pragma unroll
  for (int offset = 16; offset > 0; offset /= 2) value = fmaxf(value, __shfl_xor_sync(kFullMask, value, offset));
  return value;
}

// Sum over the block; every thread gets the result. `scratch` holds one float per warp (32 suffice).
__device__ __forceinline__ float block_sum(float value, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  value = warp_sum(value);
  __syncthreads();  // scratch may still be read by a previous reduction
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : 0.0f;
  return warp_sum(value);
}

__device__ __forceinline__ float block_max(float value, float* scratch) {
  const int lane = threadIdx.x % 32, warp = threadIdx.x / 32, warps = (blockDim.x + 31) / 32;
  value = warp_max(value);
  __syncthreads();
  if (lane == 0) scratch[warp] = value;
  __syncthreads();
  value = lane < warps ? scratch[lane] : -INFINITY;
  return warp_max(value);
}

// ---- launch sizes, from the device's properties ----

// Blocks for a grid-stride loop over `work` items: enough to fill every multiprocessor several times.
inline unsigned grid_size(int64_t work, int threads) {
  const int64_t wanted = (work + threads - 1) / threads;
  const int64_t cap = static_cast<int64_t>(context().properties.multiProcessorCount) * 32;
  return static_cast<unsigned>(std::max<int64_t>(1, std::min(wanted, cap)));
}

// Launchers refuse host tensors: a kernel reading host memory would fault far from the cause.
inline void check_on_device(const char* op, const char* operand, const Tensor& x) {
  SEQTRANS_CHECK(x.device() == Device::CUDA, "{}: {} must be on the CUDA device", op, operand);
}

inline void check_same_dtype(const char* op, const char* operand, const Tensor& x, DataType dtype) {
  SEQTRANS_CHECK(x.dtype() == dtype, "{}: {} is {} but the op computes in {}", op, operand, dtype_name(x.dtype()),
                 dtype_name(dtype));
}

}  // namespace seqtrans::cuda
