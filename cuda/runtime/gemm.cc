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

// (device, m, n, k, transposed, epilogue, input dtype, output dtype, fixed order): an algorithm is chosen for one
// device's properties.
using LtKey = std::tuple<int, int64_t, int64_t, int64_t, bool, int, int, int, bool>;

LtKey plan_key(const GemmProblem& p, GemmEpilogue epilogue, bool fixed_order) {
  return {context().device_index, p.m,   p.n, p.k, p.transpose_b == TransposeB::Yes, static_cast<int>(epilogue),
          static_cast<int>(p.dtype), static_cast<int>(p.output_dtype), fixed_order};
}

cudaDataType_t cuda_type(DataType dtype) { return dtype == DataType::F16 ? CUDA_R_16F : CUDA_R_32F; }

cublasLtEpilogue_t lt_epilogue(GemmEpilogue epilogue) {
  switch (epilogue) {
    case GemmEpilogue::None: return CUBLASLT_EPILOGUE_DEFAULT;
    case GemmEpilogue::Bias: return CUBLASLT_EPILOGUE_BIAS;
    case GemmEpilogue::ReluBias: return CUBLASLT_EPILOGUE_RELU_BIAS;
  }
  return CUBLASLT_EPILOGUE_DEFAULT;
}

// The operation and layouts of one shape, with no algorithm yet.
LtPlan make_descriptors(const GemmProblem& p, GemmEpilogue epilogue) {
  LtPlan plan;
  const bool transpose_b = p.transpose_b == TransposeB::Yes;
  // Column-major view, as in gemm_row_major: c^T[n, m] = b'[n, k] x a'[k, m]; the bias runs along n. fp32 is
  // pedantic, as in gemm_row_major.
  const cublasOperation_t op_weight = transpose_b ? CUBLAS_OP_T : CUBLAS_OP_N, op_input = CUBLAS_OP_N;
  const cublasComputeType_t compute = p.dtype == DataType::F16 ? CUBLAS_COMPUTE_32F : CUBLAS_COMPUTE_32F_PEDANTIC;
  CUBLAS_CHECK(blas_library().cublasLtMatmulDescCreate(&plan.operation, compute, CUDA_R_32F));
  CUBLAS_CHECK(blas_library().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSA, &op_weight,
                                              sizeof(op_weight)));
  CUBLAS_CHECK(blas_library().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_TRANSB, &op_input,
                                              sizeof(op_input)));
  const cublasLtEpilogue_t kind = lt_epilogue(epilogue);
  CUBLAS_CHECK(blas_library().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_EPILOGUE, &kind, sizeof(kind)));
  const uint64_t m = static_cast<uint64_t>(p.m), n = static_cast<uint64_t>(p.n), k = static_cast<uint64_t>(p.k);
  const cudaDataType_t input_type = cuda_type(p.dtype), output_type = cuda_type(p.output_dtype);
  if (transpose_b)
    CUBLAS_CHECK(blas_library().cublasLtMatrixLayoutCreate(&plan.weight, input_type, k, n, static_cast<int64_t>(k)));
  else
    CUBLAS_CHECK(blas_library().cublasLtMatrixLayoutCreate(&plan.weight, input_type, n, k, static_cast<int64_t>(n)));
  CUBLAS_CHECK(blas_library().cublasLtMatrixLayoutCreate(&plan.input, input_type, k, m, static_cast<int64_t>(k)));
  CUBLAS_CHECK(blas_library().cublasLtMatrixLayoutCreate(&plan.output, output_type, n, m, static_cast<int64_t>(n)));
  return plan;
}

uint32_t splits_of(const cublasLtMatmulAlgo_t& algorithm) {
  uint32_t splits = 1;
  size_t written = 0;
  CUBLAS_CHECK(blas_library().cublasLtMatmulAlgoConfigGetAttribute(&algorithm, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits,
                                                    sizeof(splits), &written));
  return splits;
}

// The heuristic's first algorithm for the plan's shape. fixed_order: only algorithms that sum each output's
// products in one pass over k (no split-K and no reduction of partial sums), so that the order is the kernel's
// own, the same for any m.
void choose_algorithm(LtPlan& plan, bool fixed_order) {
  cublasLtMatmulPreference_t preference = nullptr;
  CUBLAS_CHECK(blas_library().cublasLtMatmulPreferenceCreate(&preference));
  const size_t workspace = context().blas_workspace_bytes;
  CUBLAS_CHECK(blas_library().cublasLtMatmulPreferenceSetAttribute(preference, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace,
                                                    sizeof(workspace)));
  if (fixed_order) {
    const uint32_t no_reduction = CUBLASLT_REDUCTION_SCHEME_NONE;
    CUBLAS_CHECK(blas_library().cublasLtMatmulPreferenceSetAttribute(
        preference, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &no_reduction, sizeof(no_reduction)));
  }
  constexpr int kWanted = 8;
  cublasLtMatmulHeuristicResult_t results[kWanted]{};
  int found = 0;
  const cublasStatus_t status =
      blas_library().cublasLtMatmulAlgoGetHeuristic(context().blas_lt, plan.operation, plan.weight, plan.input, plan.output,
                                     plan.output, preference, fixed_order ? kWanted : 1, results, &found);
  blas_library().cublasLtMatmulPreferenceDestroy(preference);
  if (status != CUBLAS_STATUS_SUCCESS) return;
  for (int i = 0; i < found && !plan.usable; ++i) {
    if (fixed_order && splits_of(results[i].algo) > 1) continue;
    plan.algorithm = results[i].algo;
    plan.usable = true;
  }
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

// Fixed order: the algorithm of every m is the one chosen for this many rows (a decoder step of 64 sentences
// at beam 4; the encoder's thousands of rows and a batch-1 step run it too), checked for each m it meets.
constexpr int64_t kFixedOrderRows = 256;

LtPlan make_plan(const GemmProblem& p, GemmEpilogue epilogue, bool fixed_order, std::map<LtKey, LtPlan>& plans) {
  LtPlan plan = make_descriptors(p, epilogue);
  if (!fixed_order) {
    choose_algorithm(plan, false);
    return plan;
  }
  GemmProblem reference = p;
  reference.m = kFixedOrderRows;
  const LtKey reference_key = plan_key(reference, epilogue, true);
  auto chosen = plans.find(reference_key);
  if (chosen == plans.end()) {
    LtPlan reference_plan = make_descriptors(reference, epilogue);
    choose_algorithm(reference_plan, true);
    chosen = plans.emplace(reference_key, reference_plan).first;
  }
  SEQTRANS_CHECK(chosen->second.usable, "batch-invariant GEMM: cuBLASLt offers no single-pass algorithm for {} x {} x {}",
                 kFixedOrderRows, p.n, p.k);
  plan.algorithm = chosen->second.algorithm;
  cublasLtMatmulHeuristicResult_t check{};
  const cublasStatus_t status = blas_library().cublasLtMatmulAlgoCheck(
      context().blas_lt, plan.operation, plan.weight, plan.input, plan.output, plan.output, &plan.algorithm, &check);
  SEQTRANS_CHECK(status == CUBLAS_STATUS_SUCCESS && check.workspaceSize <= context().blas_workspace_bytes,
                 "batch-invariant GEMM: the algorithm chosen for {} rows cannot run {} x {} x {}", kFixedOrderRows, p.m,
                 p.n, p.k);
  plan.usable = true;
  return plan;
}

bool run_lt(const GemmProblem& p, const void* bias, GemmEpilogue epilogue, bool fixed_order, cudaStream_t stream) {
  DevicePlans& device = device_plans(context().device_index);
  std::lock_guard<std::mutex> lock(device.mutex);
  std::map<LtKey, LtPlan>& plans = device.plans;
  const LtKey key = plan_key(p, epilogue, fixed_order);
  auto found = plans.find(key);
  if (found == plans.end()) found = plans.emplace(key, make_plan(p, epilogue, fixed_order, plans)).first;
  LtPlan& plan = found->second;
  if (!plan.usable) return false;
  if (epilogue != GemmEpilogue::None)
    CUBLAS_CHECK(blas_library().cublasLtMatmulDescSetAttribute(plan.operation, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bias, sizeof(bias)));
  const float beta = 0.0f;
  CUBLAS_CHECK(blas_library().cublasLtMatmul(context().blas_lt, plan.operation, &p.alpha, p.b, plan.weight, p.a, plan.input, &beta,
                              p.c, plan.output, p.c, plan.output, &plan.algorithm, context().blas_workspace,
                              context().blas_workspace_bytes, stream));
  return true;
}

}  // namespace

bool gemm_row_major_with_bias(const GemmProblem& p, const void* bias, GemmEpilogue epilogue, cudaStream_t stream) {
  if (p.dtype != DataType::F16 || p.output_dtype != DataType::F16 || p.m == 0 || p.n == 0 || p.k == 0) return false;
  return run_lt(p, bias, epilogue, /*fixed_order=*/false, stream);
}

void gemm_row_major_fixed_order(const GemmProblem& p, const void* bias, GemmEpilogue epilogue, cudaStream_t stream) {
  SEQTRANS_CHECK(p.dtype == DataType::F32 || p.dtype == DataType::F16, "matmul: no CUDA GEMM for {}", dtype_name(p.dtype));
  SEQTRANS_CHECK((bias == nullptr) == (epilogue == GemmEpilogue::None), "matmul: a bias epilogue needs a bias");
  SEQTRANS_CHECK(p.k > 0, "matmul: a fixed-order GEMM needs k > 0");
  if (p.m == 0 || p.n == 0) return;
  run_lt(p, bias, epilogue, /*fixed_order=*/true, stream);
}

}  // namespace seqtrans::cuda
