// The CPU's own matrix-product kernels over packed weights (cpu/packed_matrix.h), internal to the backend.
#pragma once

#include <cstdint>
#include <optional>

#include "cpu/isa.h"
#include "cpu/packed_matrix.h"
#include "ops/ops.h"

namespace seqtrans::cpu {

// What a product does to its block of c after the sum: c = activation(c + bias), by add_bias_columns and
// bias_activation_columns (the plain path's epilogue), while the block is still in cache.
struct GemmEpilogue {
  const float* bias = nullptr;  // [n], or none
  std::optional<Activation> activation;
};

// c[:, columns of panels [panel_begin, panel_end)) = a [m, k] x b^T, then the epilogue; c's rows are ldc
// floats apart, and columns past b.rows() are not written. b in WeightFormat::Packed, isa Avx2 or Avx512.
//
// Every element is one chain of fused multiply-adds over k from 0, acc = fma(a[i, kk], b[j, kk], acc), in
// both builds and for any split of rows or columns: the bits OpenBLAS gives where it runs one chain per
// element (see packed_matmul_fits).
// Whether cpu::matmul's packed fp32 path takes a part of `rows` x `cols` over k (it gives the plain path's
// bits there): k within OpenBLAS's first block of k, and a shape its small-matrix kernels do not take.
bool packed_matmul_exact(int64_t rows, int64_t cols, int64_t k);

void packed_gemm_f32(const float* a, int64_t m, const PackedMatrix& b, int64_t panel_begin, int64_t panel_end,
                     float* c, int64_t ldc, const GemmEpilogue& epilogue, Isa isa);

}  // namespace seqtrans::cpu
