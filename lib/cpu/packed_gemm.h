// The CPU's own matrix-product kernels over packed weights (cpu/packed_matrix.h), internal to the backend.
#pragma once

#include <cstdint>
#include <optional>

#include "cpu/isa.h"
#include "cpu/packed_matrix.h"
#include "ops/op_types.h"

namespace seqtrans::cpu {

// What a product does to its block of c after the sum: c = activation(c + bias), by add_bias_columns and
// bias_activation_columns (the plain path's epilogue), while the block is still in cache.
struct GemmEpilogue {
  const float* bias = nullptr;  // [n], or none
  std::optional<Activation> activation;
};

// The epilogue on rows [0, rows) of a block of c (rows ldc floats apart) whose columns are [begin, end).
void finish_block(float* c, int64_t rows, int64_t ldc, int64_t begin, int64_t end, const GemmEpilogue& epilogue);

// c[:, columns of panels [panel_begin, panel_end)) = a [m, k] x b^T, then the epilogue; c's rows are ldc
// floats apart, and columns past b.rows() are not written. b in WeightFormat::Packed, isa Avx2 or Avx512.
//
// Every element is one chain of fused multiply-adds over k from 0, acc = fma(a[i, kk], b[j, kk], acc), in
// every build and for any split of rows or columns: cpu::matmul's bits at any thread count and, row by row,
// at any row count.
void packed_gemm_f32(const float* a, int64_t m, const PackedMatrix& b, int64_t panel_begin, int64_t panel_end,
                     float* c, int64_t ldc, const GemmEpilogue& epilogue, Isa isa);

// Column panels of an fp32 weight [n, k] in PackedMatrix's layout, wherever they are: panel p ([k][kPanelWidth]
// floats, 64-byte aligned) at base + (p - first) * k * kPanelWidth.
struct F32Panels {
  const float* base;
  int64_t first;
  int64_t n, k;
  const float* panel(int64_t p) const { return base + (p - first) * k * PackedMatrix::kPanelWidth; }
};
// packed_gemm_f32 over any panels, and on any CPU: Isa::Portable runs a scalar tile with the same chain.
void packed_gemm_f32(const float* a, int64_t m, const F32Panels& b, int64_t panel_begin, int64_t panel_end,
                     float* c, int64_t ldc, const GemmEpilogue& epilogue, Isa isa);
// Writes panels [panel_begin, panel_end) of b into out (64-byte aligned, (panel_end - panel_begin) * k *
// kPanelWidth floats): b is [n, k], or [k, n] where !transpose_b; channels past n are zeros.
void pack_f32_panels(const float* b, bool transpose_b, int64_t n, int64_t k, int64_t panel_begin, int64_t panel_end,
                     float* out);

// Whether OpenBLAS sums each element of the products cpu::matmul hands it (k within its first block, past its
// small-matrix kernels) as the packed kernels do, one chain of fused multiply-adds over k: its Skylake-X
// kernels do; its Haswell ones (OPENBLAS_CORETYPE=Haswell, set by default on some machines) sum in orders
// that change with the split of rows and columns. Tried once, on three such shapes.
bool blas_sums_in_one_chain();

// ---- int8 (WeightFormat::Int8) ----

// The int8 kernels: AVX-512 VNNI (vpdpbusd: 64 byte products a register and instruction, unsigned times
// signed, so the activations come offset by 128 and each channel's sum of q corrects for it), or AVX2
// (vpmaddubsw on |x| and w with x's sign, then vpmaddwd: no pair of products can saturate, |q| <= 127).
enum class Int8Kernel { Avx2, Avx512Vnni };
// The kernel this CPU runs (cpu_isa() at least Avx2).
Int8Kernel int8_kernel();
// Whether `kernel` reads activations offset by 128 (unsigned).
bool int8_offset(Int8Kernel kernel);

// Rows of x [rows, k] quantized for the int8 products: row i ~ scale[i] * q[i, :], scale[i] = max |x[i, :]| /
// 127, q = round(x / scale) (to nearest, ties to even) in [-127, 127]; q is [rows][quads * 4] bytes, k padded
// with zeros; with `offset`, each byte holds q + 128 (zeros: 128).
void quantize_rows(const float* x, int64_t rows, int64_t k, int64_t quads, bool offset, uint8_t* q, float* scales);

// c[:, columns of panels [panel_begin, panel_end)) = (q x b^T) scaled, then the epilogue: element (i, j) is
// float(sum over kk of q[i, kk] * qw[j, kk]) * (scale[i] * b.scales()[j]), the sum exact in int32, so every
// kernel gives the same bits before the epilogue. q and scales from quantize_rows (offset as the kernel
// reads it); b Int8. An activation is bias_activation_approximate's (swish's exp vectorized).
void packed_gemm_i8(const uint8_t* q, const float* scales, int64_t m, const PackedMatrix& b, int64_t panel_begin,
                    int64_t panel_end, float* c, int64_t ldc, const GemmEpilogue& epilogue, Int8Kernel kernel);

}  // namespace seqtrans::cpu
