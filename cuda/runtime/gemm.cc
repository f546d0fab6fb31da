#include "cuda/runtime/gemm.h"
#include "cuda/runtime/blas_library.h"

#include <climits>
#include <map>
#include <mutex>
#include <tuple>

#include "cuda/runtime/check.h"
#include "cuda/runtime/context.h"

namespace seqtrans::cuda {

void gemm_row_major(const GemmProblem& p, cudaStream_t stream) {
  if (p.m == 0 || p.n == 0) return;
  SEQTRANS_CHECK(p.m <= INT_MAX && p.n <= INT_MAX && p.k <= INT_MAX, "matmul: extents {}x{}x{} exceed cuBLAS's int",
                 p.m, p.n, p.k);
  SEQTRANS_CHECK(p.dtype == DataType::F32 || p.dtype == DataType::F16, "matmul: no CUDA GEMM for {}",
                 dtype_name(p.dtype));
  const cublasHandle_t handle = context().blas;
  CUBLAS_CHECK(blas_library().cublasSetStream(handle, stream));
  const int m = static_cast<int>(p.m), n = static_cast<int>(p.n), k = static_cast<int>(p.k);
  // Row-major c[m, n] is column-major c^T[n, m] = b'[n, k] x a'[k, m], where a' is row-major a read as
  // column-major ([k, m], ld k) and b' is b read as column-major: [k, n] (ld k) transposed when b is
  // row-major [n, k], or [n, k] (ld n) as is when b is row-major [k, n].
  const bool transpose_b = p.transpose_b == TransposeB::Yes;
  const cublasOperation_t op_b = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N;
  const int ld_b = transpose_b ? k : n;
  const cudaDataType_t type = p.dtype == DataType::F16 ? CUDA_R_16F : CUDA_R_32F;
  // Pedantic fp32 keeps fp32 results within ~1e-5 of the CPU; fp16 inputs use Tensor Cores.
  const cublasComputeType_t compute = p.dtype == DataType::F16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
  const float beta = 0.0f;
  if (k == 0) {
    CUDA_CHECK(cudaMemsetAsync(p.c, 0, static_cast<size_t>(p.m) * p.n * dtype_size(p.output_dtype), stream));
    return;
  }
  const cudaDataType_t output_type = p.output_dtype == DataType::F16 ? CUDA_R_16F : CUDA_R_32F;
  CUBLAS_CHECK(blas_library().cublasGemmEx(handle, op_b, CUBLAS_OP_N, n, m, k, &p.alpha, p.b, type, ld_b, p.a, type, k, &beta, p.c,
                            output_type, n, compute, CUBLAS_GEMM_DEFAULT));
}

}  // namespace seqtrans::cuda

namespace seqtrans::cuda {
namespace {

// cuBLASLt descriptors and the chosen algorithm of one GEMM shape: made once, reused by every call
// (only the bias pointer changes between calls).
struct LtPlan {
  cublasLtMatmulDesc_t operation = nullptr;
  cublasLtMatrixLayout_t weight = nullptr, input = nullptr, output = nullptr;
  cublasLtMatmulAlgo_t algorithm{};
  bool usable = false;
};

// (device, m, n, k, transposed, epilogue): an algorithm is chosen for one device's properties.
using LtKey = std::tuple<int, int64_t, int64_t, int64_t, bool, int>;

LtPlan make_plan(const GemmProblem& p, GemmEpilogue epilogue) {
  LtPlan plan;
  const bool transpose_b = p.transpose_b == TransposeB::Yes;
  // Column-major view, as in gemm_row_major: c^T[n, m] = b'[n, k] x a'[k, m]; the bias runs along n.
  const cublasOperation_t op_weight = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_input = CUBLAS_OP_N;
  CUBLAS_CHECK(blas_library().cublasLtMatmulDescCreate(&plan.operation, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  CUBLAS_CHECK(blas_library().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_weight,
                                              sizeof(op_weight)));
  CUBLAS_CHECK(blas_library().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_input,
                                              sizeof(op_input)));
  const cublasLtEpilogue_t kind = epilogue == GemmEpilogue::ReluBias ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS;
  CUBLAS_CHECK(blas_library().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &kind, sizeof(kind)));
  const uint64_t m = static_cast<uint64_t>(p.m), n = static_cast<uint64_t>(p.n), k = static_cast<uint64_t>(p.k);
  if (transpose_b)
    CUBLAS_CHECK(blas_library().cublasLtMatrixLayoutCreate(&plan.weight, CUDA_R_16F, k, n, static_cast<int64_t>(k)));
  else
    CUBLAS_CHECK(blas_library().cublasLtMatrixLayoutCreate(&plan.weight, CUDA_R_16F, n, k, static_cast<int64_t>(n)));
  CUBLAS_CHECK(blas_library().cublasLtMatrixLayoutCreate(&plan.input, CUDA_R_16F, k, m, static_cast<int64_t>(k)));
  CUBLAS_CHECK(blas_library().cublasLtMatrixLayoutCreate(&plan.output, CUDA_R_16F, n, m, static_cast<int64_t>(n)));

  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(blas_library().cublasLtMatmulPreferenceCreate(&preference));
  const size_t workspace = context().blas_workspace_bytes;
  CUBLAS_CHECK(blas_library().cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                    sizeof(workspace)));
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t status =
      blas_library().cublasLtMatmulAlgoGetHeuristic(context().blas_lt, plan.operation, plan.weight, plan.input, plan.output,
                                     plan.output, preference, 1, &result, &found);
  blas_library().cublasLtMatmulPreferenceDestroy(preference);
  plan.usable = status == CUBLAS_STATUS_SUCCESS && found > 0;
  if (plan.usable) plan.algorithm = result.algo;
  return plan;
}

// One device's plans; they live until exit (a few dozen shapes per model). The lock also covers the call,
// since the bias pointer is set on the shared plan. A lock per device: engines on two GPUs never wait for
// each other's GEMM launches.
struct DevicePlans {
  std::mutex mutex;
  std::map<LtKey, LtPlan> plans;
};

DevicePlans& device_plans(int device_index) {
  static std::mutex registry_mutex;
  static std::map<int, DevicePlans> by_device;  // map nodes never move: references stay valid
  std::lock_guard<std::mutex> lock(registry_mutex);
  return by_device[device_index];
}

}  // namespace

bool gemm_row_major_with_bias(const GemmProblem& p, const void* bias, GemmEpilogue epilogue, cudaStream_t stream) {
  if (p.dtype != DataType::F16 || p.output_dtype != DataType::F16 || p.m == 0 || p.n == 0 || p.k == 0) return false;
  DevicePlans& device = device_plans(context().device_index);
  std::lock_guard<std::mutex> lock(device.mutex);
  std::map<LtKey, LtPlan>& plans = device.plans;
  const LtKey key{context().device_index, p.m, p.n, p.k, p.transpose_b == TransposeB::Yes, static_cast<int>(epilogue)};
  auto found = plans.find(key);
  if (found == plans.end()) found = plans.emplace(key, make_plan(p, epilogue)).first;
  LtPlan& plan = found->second;
  if (!plan.usable) return false;
  CUBLAS_CHECK(blas_library().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float beta = 0.0f;
  CUBLAS_CHECK(blas_library().cublasLtMatmul(context().blas_lt, plan.operation, &p.alpha, p.b, plan.weight, p.a, plan.input, &beta,
                              p.c, plan.output, p.c, plan.output, &plan.algorithm, context().blas_workspace,
                              context().blas_workspace_bytes, stream));
  return true;
}

}  // namespace seqtrans::cuda
