// The one GEMM primitive of the CUDA backend, on row-major operands. cuBLAS is column-major: the
// argument swap that bridges the two lives here and nowhere else.
#pragma once

#include <cstdint>

#include <cuda_runtime_api.h>

#include "core/dtype.h"

namespace seqtrans::cuda {

enum class TransposeB { No, Yes };

// c[m, n] = alpha * a[m, k] x b^T (b: [n, k], TransposeB::Yes) or alpha * a[m, k] x b (b: [k, n]).
// a and b share `dtype`; c is `output_dtype` (the same, or fp32 with fp16 inputs). fp32 computes in plain fp32 (no TF32); fp16 runs on Tensor Cores with fp32
// accumulation.
struct GemmProblem {
  const void* a = nullptr;
  const void* b = nullptr;
  void* c = nullptr;
  DataType dtype = DataType::F32;         // a and b
  DataType output_dtype = DataType::F32;  // c: dtype, or fp32 for fp16 inputs
  int64_t m = 0, n = 0, k = 0;
  TransposeB transpose_b = TransposeB::Yes;
  float alpha = 1.0f;
};

void gemm_row_major(const GemmProblem& problem, cudaStream_t stream);

// c = epilogue(alpha * a x b + bias[n]) in one cuBLASLt call, for fp16 inputs and output. Returns false
// (and does nothing) where cuBLASLt offers no algorithm; the caller then adds the bias itself.
enum class GemmEpilogue { None, Bias, ReluBias };
bool gemm_row_major_with_bias(const GemmProblem& problem, const void* bias, GemmEpilogue epilogue,
                              cudaStream_t stream);

// c = epilogue(alpha * a x b (+ bias[n])), fp16 or fp32, with one cuBLASLt algorithm for every m of an
// (n, k, operands, epilogue) shape and no split-K: each output is summed over k in the kernel's own order,
// so a row's values do not depend on how many rows the call has (batch-invariant mode). bias is null for
// GemmEpilogue::None. Throws where cuBLASLt has no such algorithm.
void gemm_row_major_fixed_order(const GemmProblem& problem, const void* bias, GemmEpilogue epilogue,
                                cudaStream_t stream);

}  // namespace seqtrans::cuda
