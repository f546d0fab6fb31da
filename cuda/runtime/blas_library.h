// cuBLAS and cuBLASLt, opened with dlopen on first use instead of linked: linking maps and relocates about
// 600 MB of libraries before main() runs, 70 ms that every process paid (measured on the CI machine with a
// program that does nothing), CPU runs and --help included. A GPU run starts opening them on a thread of
// their own while the device initializes (preload_blas_library).
#pragma once

#include <cublasLt.h>
#include <cublas_v2.h>

namespace seqtrans::cuda {

// The entry points seqtrans calls, named as in the headers (whose macros pick the _v2 symbols).
#define SEQTRANS_BLAS_FUNCTIONS(X)                                                                             \
  X(cublas, cublasCreate)                                                                                      \
  X(cublas, cublasDestroy)                                                                                     \
  X(cublas, cublasSetStream)                                                                                   \
  X(cublas, cublasSetMathMode)                                                                                 \
  X(cublas, cublasSetWorkspace)                                                                                \
  X(cublas, cublasGetStatusString)                                                                             \
  X(cublas, cublasGetStatusName)                                                                               \
  X(lt, cublasLtCreate)                                                                                        \
  X(lt, cublasLtDestroy)                                                                                       \
  X(lt, cublasLtMatmulDescCreate)                                                                              \
  X(lt, cublasLtMatmulDescSetAttribute)                                                                        \
  X(lt, cublasLtMatrixLayoutCreate)                                                                            \
  X(lt, cublasLtMatmulPreferenceCreate)                                                                        \
  X(lt, cublasLtMatmulPreferenceDestroy)                                                                       \
  X(lt, cublasLtMatmulPreferenceSetAttribute)                                                                  \
  X(lt, cublasLtMatmulAlgoGetHeuristic)                                                                        \
  X(lt, cublasLtMatmulAlgoCheck)                                                                               \
  X(lt, cublasLtMatmulAlgoConfigGetAttribute)                                                                  \
  X(lt, cublasLtMatmul)

// cublasGemmEx has a C++ overload (an older compute-type argument): the one exported, by its type.
using CublasGemmExFunction = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int, int,
                                                const void*, const void*, cudaDataType, int, const void*, cudaDataType,
                                                int, const void*, void*, cudaDataType, int, cublasComputeType_t,
                                                cublasGemmAlgo_t);

struct BlasLibrary {
#define SEQTRANS_BLAS_MEMBER(library, name) decltype(&::name) name = nullptr;
  SEQTRANS_BLAS_FUNCTIONS(SEQTRANS_BLAS_MEMBER)
#undef SEQTRANS_BLAS_MEMBER
  CublasGemmExFunction cublasGemmEx = nullptr;
};

// Opens both libraries once (any thread may ask; the first opens) and resolves the entry points. A
// library or symbol that is missing throws a one-line Error naming it (again at every call).
const BlasLibrary& blas_library();

// Starts blas_library() on a background thread and returns at once.
void preload_blas_library();

}  // namespace seqtrans::cuda
