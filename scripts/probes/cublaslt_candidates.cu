// Times each of cuBLASLt's heuristic candidates (up to 16) for the decoder-step products at 16-256 rows: fp16 in
// and out, fp32 compute, C[m, n] = X[m, k] W[n, k]^T, the layout the engine plans (cuda/runtime/gemm.cc). Eight
// weight copies rotate so that the weights stream from memory, and each candidate runs as a CUDA graph of 64
// products, as a decoder step does. Prints us per product, GB/s of weights, split-K, tile id and waves.
// Build and run on a GPU machine (docs/BENCHMARKS.md, session 8, quotes its results):
//   nvcc -O2 -arch=sm_90 -o /tmp/cublaslt_candidates scripts/probes/cublaslt_candidates.cu -lcublasLt
//   /tmp/cublaslt_candidates
#include <cublasLt.h>
#include <cuda_fp16.h>
#include <cstdio>
#include <vector>
#define CK(x) do { auto e = (x); if (e != 0) { printf("error %d at %s:%d\n", (int)e, __FILE__, __LINE__); return; } } while (0)
struct Shape { const char* name; int m, n, k; };
void run(cublasLtHandle_t lt, const Shape& s, void* ws, size_t wsb, cudaStream_t st) {
  const int copies = 8;
  std::vector<__half*> w(copies);
  for (auto& p : w) { cudaMalloc(&p, size_t(s.n) * s.k * 2); cudaMemset(p, 0, size_t(s.n) * s.k * 2); }
  __half *x, *c; cudaMalloc(&x, size_t(s.m) * s.k * 2); cudaMalloc(&c, size_t(s.m) * s.n * 2);
  cudaMemset(x, 0, size_t(s.m) * s.k * 2);
  cublasLtMatmulDesc_t op; CK(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
  cublasOperation_t t = CUBLAS_OP_T, n = CUBLAS_OP_N;
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &t, sizeof(t));
  cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &n, sizeof(n));
  cublasLtMatrixLayout_t a, b, cl;
  CK(cublasLtMatrixLayoutCreate(&a, CUDA_R_16F, s.k, s.n, s.k));
  CK(cublasLtMatrixLayoutCreate(&b, CUDA_R_16F, s.k, s.m, s.k));
  CK(cublasLtMatrixLayoutCreate(&cl, CUDA_R_16F, s.n, s.m, s.n));
  cublasLtMatmulPreference_t pref; cublasLtMatmulPreferenceCreate(&pref);
  cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &wsb, sizeof(wsb));
  cublasLtMatmulHeuristicResult_t r[16]; int found = 0;
  CK(cublasLtMatmulAlgoGetHeuristic(lt, op, a, b, cl, cl, pref, 16, r, &found));
  float alpha = 1, beta = 0;
  for (int i = 0; i < found; ++i) {
    uint32_t splits = 1; size_t wr = 0;
    cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &splits, sizeof(splits), &wr);
    int tile = 0; cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_TILE_ID, &tile, sizeof(tile), &wr);
    uint32_t red = 0; cublasLtMatmulAlgoConfigGetAttribute(&r[i].algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &red, sizeof(red), &wr);
    cudaGraph_t g; cudaGraphExec_t ge;
    cudaStreamBeginCapture(st, cudaStreamCaptureModeRelaxed);
    bool ok = true;
    for (int j = 0; j < 64; ++j)
      if (cublasLtMatmul(lt, op, &alpha, w[j % copies], a, x, b, &beta, c, cl, c, cl, &r[i].algo, ws, wsb, st) != 0) ok = false;
    cudaStreamEndCapture(st, &g);
    if (!ok || cudaGraphInstantiate(&ge, g, 0) != cudaSuccess) { printf("%-22s m=%4d cand %2d failed\n", s.name, s.m, i); cudaGetLastError(); continue; }
    cudaEvent_t e0, e1; cudaEventCreate(&e0); cudaEventCreate(&e1);
    for (int j = 0; j < 3; ++j) cudaGraphLaunch(ge, st);
    cudaEventRecord(e0, st);
    for (int j = 0; j < 10; ++j) cudaGraphLaunch(ge, st);
    cudaEventRecord(e1, st); cudaEventSynchronize(e1);
    float ms = 0; cudaEventElapsedTime(&ms, e0, e1);
    const double us = ms * 1000 / 640, gbs = double(s.n) * s.k * 2 / (us * 1e3);
    printf("%-22s m=%4d cand %2d  %7.2f us %6.0f GB/s  splitK %2u red %u tile %3d waves %.2f ws %zu\n", s.name, s.m, i, us, gbs,
           splits, red, tile, r[i].wavesCount, r[i].workspaceSize);
    cudaGraphExecDestroy(ge); cudaGraphDestroy(g);
  }
  for (auto& p : w) cudaFree(p);
  cudaFree(x); cudaFree(c);
}
int main() {
  cublasLtHandle_t lt; cublasLtCreate(&lt);
  cudaStream_t st; cudaStreamCreate(&st);
  size_t wsb = 32 << 20; void* ws; cudaMalloc(&ws, wsb);
  const Shape base[] = {{"tinyllama qkv", 0, 2560, 2048}, {"tinyllama out", 0, 2048, 2048}, {"tinyllama gate+up", 0, 11264, 2048},
                        {"tinyllama down", 0, 2048, 5632}, {"nllb qkv", 0, 3072, 1024}, {"nllb out", 0, 1024, 1024},
                        {"nllb ffn in", 0, 4096, 1024}, {"nllb ffn out", 0, 1024, 4096}};
  for (int m : {16, 64, 128, 256})
    for (Shape s : base) { s.m = m; run(lt, s, ws, wsb, st); }
  Shape logits{"nllb logits", 128, 256206, 1024}; run(lt, logits, ws, wsb, st);
  logits.m = 256; run(lt, logits, ws, wsb, st);
  return 0;
}
