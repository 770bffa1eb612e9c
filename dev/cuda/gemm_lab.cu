// Lab for the prefill-sized products: how far cuBLASLt's first heuristic
// choice (what src/kernels/cuda/gemm.cc pins) is from the fastest of its
// top candidates, on Llama-3-8B's layer shapes, with as many rows as a
// prefill step of the engine holds. Timing: median of 9 runs of 5 back-to-back
// products, weights larger than L2 between runs. With --splitk each of the
// top candidates is also run with its k split in 2, 4 and 8 (the parts
// summed out of place in fp32, in a fixed order: no atomics), for the few-row
// products of decode steps, whose plain tiles leave most SMs idle.
//
//   gemm_lab [--splitk] [ROWS ...]      rows per product (default 8192 2048 512 128)
#include <cublasLt.h>
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "lab_common.h"

#define LT(x)                                                                           \
  do {                                                                                  \
    cublasStatus_t status_ = (x);                                                             \
    if (status_ != CUBLAS_STATUS_SUCCESS) {                                                 \
      std::fprintf(stderr, "%s:%d %s: status %d\n", __FILE__, __LINE__, #x, int(status_)); \
      std::exit(1);                                                                     \
    }                                                                                   \
  } while (0)

namespace {

struct Shape {
  const char* name;
  int64_t m, k;
  bool f32;
};
const Shape kShapes[] = {{"qkv", 6144, 4096, false},
                         {"o (+residual)", 4096, 4096, true},
                         {"gate/up", 28672, 4096, false},
                         {"down (+residual)", 4096, 14336, true}};

// Random values: constant operands draw less power and run faster than real ones.
__global__ void fill_kernel(__nv_bfloat16* p, int64_t n, uint32_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    uint32_t h = static_cast<uint32_t>(i) * 2654435761u ^ seed;
    h ^= h >> 15;
    h *= 2246822519u;
    h ^= h >> 13;
    p[i] = __float2bfloat16(0.05f * (static_cast<float>(h & 0xffff) / 32768.0f - 1.0f));
  }
}


}  // namespace

int main(int argc, char** argv) {
  std::vector<int64_t> rows;
  bool splitk = false;
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--splitk") {
      splitk = true;
      continue;
    }
    rows.push_back(std::atoll(argv[i]));
  }
  if (rows.empty()) rows = {8192, 2048, 512, 128};
  cublasLtHandle_t lt;
  LT(cublasLtCreate(&lt));
  const size_t ws_bytes = size_t{32} << 20;
  void* ws;
  CK(cudaMalloc(&ws, ws_bytes));
  void *x, *out;
  const int kCopies = 4;  // weights rotated so none stays in L2
  std::vector<void*> w(kCopies);
  CK(cudaMalloc(&x, size_t{8192} * 14336 * 2));
  CK(cudaMalloc(&out, size_t{8192} * 28672 * 4));
  for (auto& p : w) {
    CK(cudaMalloc(&p, size_t{28672} * 4096 * 2));
    fill_kernel<<<2048, 256>>>(static_cast<__nv_bfloat16*>(p), int64_t{28672} * 4096, uint32_t(&p - w.data()));
  }
  fill_kernel<<<2048, 256>>>(static_cast<__nv_bfloat16*>(x), int64_t{8192} * 14336, 99u);
  CK(cudaMemset(out, 0, size_t{8192} * 28672 * 4));
  CK(cudaDeviceSynchronize());
  cudaEvent_t a, z;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&z));
  std::printf("%-18s %6s | %-28s | %-34s | %s\n", "shape", "rows", "heuristic #1 (TFLOP/s)", "best of top 16 (TFLOP/s)",
              "candidates that ran");
  for (int64_t n : rows)
    for (const Shape& s : kShapes) {
      cublasLtMatmulDesc_t op;
      LT(cublasLtMatmulDescCreate(&op, CUBLAS_COMPUTE_32F, CUDA_R_32F));
      const cublasOperation_t ta = CUBLAS_OP_T, tb = CUBLAS_OP_N;
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta));
      LT(cublasLtMatmulDescSetAttribute(op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb));
      cublasLtMatrixLayout_t la, lb, lc;
      LT(cublasLtMatrixLayoutCreate(&la, CUDA_R_16BF, s.k, s.m, s.k));
      LT(cublasLtMatrixLayoutCreate(&lb, CUDA_R_16BF, s.k, n, s.k));
      LT(cublasLtMatrixLayoutCreate(&lc, s.f32 ? CUDA_R_32F : CUDA_R_16BF, s.m, n, s.m));
      cublasLtMatmulPreference_t pref;
      LT(cublasLtMatmulPreferenceCreate(&pref));
      LT(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws_bytes,
                                              sizeof ws_bytes));
      cublasLtMatmulHeuristicResult_t results[16];
      int found = 0;
      LT(cublasLtMatmulAlgoGetHeuristic(lt, op, la, lb, lc, lc, pref, 16, results, &found));
      const float alpha = 1.0f, beta = s.f32 ? 1.0f : 0.0f;
      const double flop = 2.0 * n * s.m * s.k;
      double first = 0, best = 0, best_plain = 0;
      int best_i = -1, best_split = 1, ran = 0;
      const int splits[] = {1, 2, 4, 8};
      for (int i = 0; i < found; ++i)
        for (int split : splits) {
          if (split > 1 && !splitk) break;
          cublasLtMatmulAlgo_t algo = results[i].algo;
          if (split > 1) {
            const int32_t num = split;
            const uint32_t scheme = CUBLASLT_REDUCTION_SCHEME_COMPUTE_TYPE;
            if (cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_SPLITK_NUM, &num, sizeof num) !=
                    CUBLAS_STATUS_SUCCESS ||
                cublasLtMatmulAlgoConfigSetAttribute(&algo, CUBLASLT_ALGO_CONFIG_REDUCTION_SCHEME, &scheme,
                                                     sizeof scheme) != CUBLAS_STATUS_SUCCESS)
              continue;
            cublasLtMatmulHeuristicResult_t check{};
            if (cublasLtMatmulAlgoCheck(lt, op, la, lb, lc, lc, &algo, &check) != CUBLAS_STATUS_SUCCESS ||
                check.workspaceSize > ws_bytes)
              continue;
          }
          std::vector<float> ms;
          bool ok = true;
          for (int rep = 0; rep < 10 && ok; ++rep) {
            CK(cudaEventRecord(a));
            for (int j = 0; j < 5; ++j)
              ok = ok && cublasLtMatmul(lt, op, &alpha, w[(rep * 5 + j) % kCopies], la, x, lb, &beta, out, lc, out,
                                        lc, &algo, ws, ws_bytes, nullptr) == CUBLAS_STATUS_SUCCESS;
            CK(cudaEventRecord(z));
            CK(cudaEventSynchronize(z));
            float t;
            CK(cudaEventElapsedTime(&t, a, z));
            if (rep > 0) ms.push_back(t / 5);
          }
          if (!ok) continue;
          ++ran;
          const double tflops = flop / (median(ms) * 1e-3) / 1e12;
          if (i == 0 && split == 1) first = tflops;
          if (split == 1) best_plain = std::max(best_plain, tflops);
          if (tflops > best) best = tflops, best_i = i, best_split = split;
        }
      const double gbs = double(s.m) * s.k * 2 / (flop / (best * 1e12)) / 1e9;  // weight bytes per second
      std::printf("%-18s %6lld | %8.1f                     | %8.1f (candidate %2d, x%.3f)      | %d configs",
                  s.name, static_cast<long long>(n), first, best, best_i, best / first, ran);
      if (splitk)
        std::printf(" | best plain %.1f, best split %d (weights at %.0f GB/s)", best_plain, best_split, gbs);
      std::printf("\n");
      std::fflush(stdout);
      cublasLtMatmulPreferenceDestroy(pref);
      cublasLtMatrixLayoutDestroy(la);
      cublasLtMatrixLayoutDestroy(lb);
      cublasLtMatrixLayoutDestroy(lc);
      cublasLtMatmulDescDestroy(op);
    }
  return 0;
}
