// cuBLASLt speaks column-major: a row-major [n, m] output is a column-major
// m x n matrix, so out = x · w^T is computed as out^T = w · x^T with w read
// transposed (a row-major [m, k] weight is a column-major k x m matrix).
#include "kernels/cuda/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdlib>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/gemm_rows.h"

namespace exactly::kernels::cuda {
namespace {

void check_lt(cublasStatus_t status, const char* what) {
  if (status != CUBLAS_STATUS_SUCCESS) fail("cuBLASLt %s: status %d", what, static_cast<int>(status));
}

cudaDataType_t cuda_type(GemmOut t) { return t == GemmOut::bf16 ? CUDA_R_16BF : CUDA_R_32F; }

}  // namespace

struct Gemm::Plan {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulAlgo_t algo{};
  ~Plan() {
    if (op) cublasLtMatmulDescDestroy(op);
    if (a) cublasLtMatrixLayoutDestroy(a);
    if (b) cublasLtMatrixLayoutDestroy(b);
    if (c) cublasLtMatrixLayoutDestroy(c);
  }
};

Gemm::Gemm(GemmOrder order, int few_rows, size_t workspace_bytes)
    : order_(order), workspace_bytes_(workspace_bytes) {
  const int most = order == GemmOrder::kCanonical ? kGemmRowsMax : kGemvMaxRows;
  few_rows_ = few_rows < 0 ? (order == GemmOrder::kCanonical ? kGemmRowsMax : kGemvDefaultRows) : std::min(few_rows, most);
  // EXACTLY_CUDA_GEMV_ROWS=N overrides where the streaming kernel takes over
  // in the fastest order (0: cuBLASLt only), to compare the paths in place.
  if (const char* e = std::getenv("EXACTLY_CUDA_GEMV_ROWS"); e != nullptr && order == GemmOrder::kFastest)
    few_rows_ = std::clamp(std::atoi(e), 0, kGemvMaxRows);
  cublasLtHandle_t h = nullptr;
  check_lt(cublasLtCreate(&h), "create");
  handle_ = h;
  if (const cudaError_t st = cudaMalloc(&workspace_, workspace_bytes_); st != cudaSuccess) {
    cublasLtDestroy(h);  // the destructor does not run for a throwing constructor
    check_cuda(st, "cuBLASLt workspace");
  }
}

Gemm::~Gemm() {
  plans_.clear();
  if (handle_) cublasLtDestroy(static_cast<cublasLtHandle_t>(handle_));
  if (workspace_) cudaFree(workspace_);
}

namespace {

void make_layouts(cublasLtMatrixLayout_t* a, cublasLtMatrixLayout_t* b, cublasLtMatrixLayout_t* c, int64_t n,
                  int64_t m, int64_t k, GemmOut out_type) {
  check_lt(cublasLtMatrixLayoutCreate(a, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(m), k),
           "layout A");
  check_lt(cublasLtMatrixLayoutCreate(b, CUDA_R_16BF, static_cast<uint64_t>(k), static_cast<uint64_t>(n), k),
           "layout B");
  check_lt(cublasLtMatrixLayoutCreate(c, cuda_type(out_type), static_cast<uint64_t>(m), static_cast<uint64_t>(n), m),
           "layout C");
}

}  // namespace

// One plan per shape, made on first use: cuBLASLt's first heuristic choice,
// in canonical order among the algorithms without split-K only.
const Gemm::Plan& Gemm::plan_for(int64_t n, int64_t m, int64_t k, GemmOut out_type, bool accumulate) {
  auto key = std::make_tuple(n, m, k, static_cast<int>(out_type), accumulate);
  auto it = plans_.find(key);
  if (it != plans_.end()) return *it->second;

  auto plan = std::make_unique<Plan>();
  check_lt(cublasLtMatmulDescCreate(&plan->op, CUBLAS_COMPUTE_32F, CUDA_R_32F), "desc");
  const cublasOperation_t transa = CUBLAS_OP_T, transb = CUBLAS_OP_N;
  check_lt(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSA, &transa, sizeof transa), "transa");
  check_lt(cublasLtMatmulDescSetAttribute(plan->op, CUBLASLT_MATMUL_DESC_TRANSB, &transb, sizeof transb), "transb");
  make_layouts(&plan->a, &plan->b, &plan->c, n, m, k, out_type);
  auto lt = static_cast<cublasLtHandle_t>(handle_);

  cublasLtMatmulPreference_t pref = nullptr;
  check_lt(cublasLtMatmulPreferenceCreate(&pref), "preference");
  check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &workspace_bytes_,
                                                sizeof workspace_bytes_),
           "preference workspace");
  if (order_ == GemmOrder::kCanonical) {
    // No split-K: each output's sum runs over k in one kernel, in order.
    const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none, sizeof none),
             "preference reduction");
  }
  cublasLtMatmulHeuristicResult_t result{};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, plan->op, plan->a, plan->b, plan->c, plan->c, pref, 1, &result, &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(st, "heuristic");
  if (found < 1)
    fail("cuBLASLt: no algorithm for a %lld x %lld x %lld bf16 product", static_cast<long long>(n),
         static_cast<long long>(m), static_cast<long long>(k));
  plan->algo = result.algo;
  return *plans_.emplace(key, std::move(plan)).first->second;
}

void Gemm::run(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, GemmOut out_type,
               bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  EXACTLY_CUDA_REQUIRE(!accumulate || out_type == GemmOut::f32, "gemm: accumulating needs an fp32 output");
  if (n <= few_rows_) {
    if (order_ == GemmOrder::kCanonical && gemm_rows_applies(n, m, k, x, w))
      return gemm_rows_bf16(x, w, out, n, m, k, out_type, accumulate, stream);
    if (order_ == GemmOrder::kFastest && gemv_applies(n, k, x, w))
      return gemv_bf16(x, w, out, n, m, k, out_type, accumulate, stream);
  }
  const Plan& plan = plan_for(n, m, k, out_type, accumulate);
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check_lt(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), plan.op, &alpha, w, plan.a, x, plan.b, &beta, out,
                          plan.c, out, plan.c, &plan.algo, workspace_, workspace_bytes_, stream),
           "matmul");
}

}  // namespace exactly::kernels::cuda
