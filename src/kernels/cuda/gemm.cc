// cuBLASLt speaks column-major: a row-major [n, m] output is a column-major
// m x n matrix, so out = x · w^T is computed as out^T = w · x^T with w read
// transposed (a row-major [m, k] weight is a column-major k x m matrix).
#include "kernels/cuda/gemm.h"

#include <cublasLt.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_buffer.h"
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
  bool few_rows = false;  // the order's few-row kernel runs this shape
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
  const int by_default = order == GemmOrder::kCanonical ? kGemmRowsMax : kGemvDefaultRows;
  few_rows_ = few_rows < 0 ? by_default : std::min(few_rows, most);
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

namespace {

// Canonical products of at most this many rows are timed on first use: every
// candidate sums in the same order, so the fastest is free to take.
constexpr int64_t kTunedRows = 128;
constexpr int kTunedCandidates = 4;  // cuBLASLt's first heuristic choices, beside gemm_rows
constexpr int kAskedCandidates = 8;  // asked of the heuristic, before keeping the canonical ones

// Whether an algorithm sums on the tensor cores with fp32 accumulators. Of
// the algorithms without split-K, these are the ones that keep the canonical
// order (dev/cuda/order_lab.cu): a CUDA-core fallback among them does not.
bool tensor_core_fp32(const cublasLtMatmulAlgo_t& algo) {
  uint64_t flags = 0;
  size_t written = 0;
  if (cublasLtMatmulAlgoCapGetAttribute(&algo, CUBLASLT_ALGO_CAP_NUMERICAL_IMPL_FLAGS, &flags, sizeof flags,
                                        &written) != CUBLAS_STATUS_SUCCESS)
    return false;
  const uint64_t accumulator = flags & CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_TYPE_MASK;
  return (flags & CUBLASLT_NUMERICAL_IMPL_FLAGS_TENSOR_OP_MASK) != 0 &&
         accumulator == CUBLASLT_NUMERICAL_IMPL_FLAGS_ACCUMULATOR_32F && (flags & CUBLASLT_NUMERICAL_IMPL_FLAGS_GAUSSIAN) == 0;
}

}  // namespace

struct Gemm::Candidate {
  bool few_rows;
  cublasLtMatmulAlgo_t algo;
};

namespace {

// EXACTLY_CUDA_GEMM_TRACE=1 names each shape's kernel on stderr, and the
// tuned candidates' times.
bool gemm_trace() {
  static const bool trace = std::getenv("EXACTLY_CUDA_GEMM_TRACE") != nullptr;
  return trace;
}

}  // namespace

// One plan per shape, made on first use: in the fastest order cuBLASLt's
// first heuristic choice (or the streaming kernel for a few rows); in
// canonical order the fastest of gemm_rows and cuBLASLt's first choices
// without split-K, timed once per power-of-two bucket of rows up to
// kTunedRows (timing costs a few milliseconds a shape, and a server's steps
// take every row count), else the first choice. Every candidate sums in the
// same order, so which one a bucket picks changes no bit.
const Gemm::Plan& Gemm::plan_for(int64_t n, int64_t m, int64_t k, GemmOut out_type, bool accumulate, const void* x,
                                 const void* w, cudaStream_t stream) {
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
  const bool canonical = order_ == GemmOrder::kCanonical;
  if (canonical) {
    // No split-K: each output's sum runs over k in one kernel, in order.
    const uint32_t none = CUBLASLT_REDUCTION_SCHEME_NONE;
    check_lt(cublasLtMatmulPreferenceSetAttribute(pref, CUBLASLT_MATMUL_PREF_REDUCTION_SCHEME_MASK, &none, sizeof none),
             "preference reduction");
  }
  cublasLtMatmulHeuristicResult_t results[kAskedCandidates] = {};
  int found = 0;
  const cublasStatus_t st =
      cublasLtMatmulAlgoGetHeuristic(lt, plan->op, plan->a, plan->b, plan->c, plan->c, pref, kAskedCandidates, results,
                                     &found);
  cublasLtMatmulPreferenceDestroy(pref);
  check_lt(st, "heuristic");

  std::vector<Candidate> candidates;
  const bool rows_fit = canonical ? n <= few_rows_ && gemm_rows_applies(n, m, k, x, w)
                                  : n <= few_rows_ && gemv_applies(n, k, x, w);
  if (rows_fit) candidates.push_back({true, {}});
  for (int i = 0, kept = 0; i < found && kept < (canonical ? kTunedCandidates : 1); ++i) {
    if (canonical && !tensor_core_fp32(results[i].algo)) continue;
    candidates.push_back({false, results[i].algo});
    ++kept;
  }
  if (candidates.empty())
    fail("cuBLASLt: no %salgorithm for a %lld x %lld x %lld bf16 product", canonical ? "tensor-core, unsplit " : "",
         static_cast<long long>(n), static_cast<long long>(m), static_cast<long long>(k));
  // The fastest order keeps its fixed rule; canonical shapes of few rows take
  // whichever candidate is fastest here.
  size_t chosen = 0;
  if (canonical && n <= kTunedRows && candidates.size() > 1) {
    int64_t bucket = 1;
    while (bucket < n) bucket *= 2;
    const auto tuned_key = std::make_tuple(bucket, m, k, static_cast<int>(out_type), accumulate);
    if (auto t = tuned_.find(tuned_key); t != tuned_.end()) {
      chosen = std::min(t->second, candidates.size() - 1);
    } else {
      chosen = fastest_candidate(*plan, candidates, n, m, k, out_type, accumulate, x, w, stream);
      tuned_.emplace(tuned_key, chosen);
    }
  }
  plan->few_rows = candidates[chosen].few_rows;
  plan->algo = candidates[chosen].algo;
  if (gemm_trace()) {
    const char* kernel = !plan->few_rows ? "cuBLASLt" : canonical ? "gemm_rows" : "streaming kernel";
    std::fprintf(stderr, "gemm %s %lld x %lld x %lld: %s (candidate %zu of %zu)\n", canonical ? "canonical" : "fastest",
                 static_cast<long long>(n), static_cast<long long>(m), static_cast<long long>(k), kernel, chosen,
                 candidates.size());
  }
  return *plans_.emplace(key, std::move(plan)).first->second;
}

// Times each candidate on the call's own inputs, writing into scratch memory
// so that `out` is untouched: a graph of kChained launches back to back,
// replayed, as a step's graph runs its products (each launch a dependent of
// the one before, where that is on), so that neither the host's launch cost
// nor a lone kernel's start-up and drain decide; one replay to warm up, then
// the median of five.
size_t Gemm::fastest_candidate(Plan& plan, const std::vector<Candidate>& candidates, int64_t n, int64_t m, int64_t k,
                               GemmOut out_type, bool accumulate, const void* x, const void* w, cudaStream_t stream) {
  constexpr int kChained = 8;
  const size_t bytes = static_cast<size_t>(n * m) * (out_type == GemmOut::f32 ? 4 : 2);
  DeviceBuffer scratch(bytes, "product tuning");
  // A capture needs a stream of its own kind: the legacy default stream cannot be captured.
  cudaStream_t timing = stream;
  if (stream == nullptr) check_cuda(cudaStreamCreateWithFlags(&timing, cudaStreamNonBlocking), "product tuning");
  check_cuda(cudaStreamSynchronize(stream), "product tuning");
  check_cuda(cudaMemsetAsync(scratch.get(), 0, bytes, timing), "product tuning");
  cudaEvent_t start = nullptr, stop = nullptr;
  check_cuda(cudaEventCreate(&start), "product tuning");
  check_cuda(cudaEventCreate(&stop), "product tuning");
  size_t best = 0;
  float best_ms = 0;
  for (size_t i = 0; i < candidates.size(); ++i) {
    plan.few_rows = candidates[i].few_rows;
    plan.algo = candidates[i].algo;
    cudaGraph_t graph = nullptr;
    cudaGraphExec_t exec = nullptr;
    check_cuda(cudaStreamBeginCapture(timing, cudaStreamCaptureModeThreadLocal), "product tuning");
    for (int c = 0; c < kChained; ++c) launch(plan, x, w, scratch.get(), n, m, k, out_type, accumulate, timing);
    check_cuda(cudaStreamEndCapture(timing, &graph), "product tuning");
    check_cuda(cudaGraphInstantiate(&exec, graph, 0), "product tuning");
    std::vector<float> ms;
    for (int rep = 0; rep < 6; ++rep) {
      check_cuda(cudaEventRecord(start, timing), "product tuning");
      check_cuda(cudaGraphLaunch(exec, timing), "product tuning");
      check_cuda(cudaEventRecord(stop, timing), "product tuning");
      check_cuda(cudaEventSynchronize(stop), "product tuning");
      float t = 0;
      check_cuda(cudaEventElapsedTime(&t, start, stop), "product tuning");
      if (rep >= 1) ms.push_back(t);
    }
    cudaGraphExecDestroy(exec);
    cudaGraphDestroy(graph);
    std::nth_element(ms.begin(), ms.begin() + ms.size() / 2, ms.end());
    const float median = ms[ms.size() / 2];
    if (gemm_trace())
      std::fprintf(stderr, "gemm tuning %lld x %lld x %lld: candidate %zu %.2f us a launch\n",
                   static_cast<long long>(n), static_cast<long long>(m), static_cast<long long>(k), i,
                   1e3 * median / kChained);
    if (i == 0 || median < best_ms) best = i, best_ms = median;
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  if (timing != stream) cudaStreamDestroy(timing);
  return best;
}

void Gemm::launch(const Plan& plan, const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k,
                  GemmOut out_type, bool accumulate, cudaStream_t stream) {
  if (plan.few_rows) {
    if (order_ == GemmOrder::kCanonical) return gemm_rows_bf16(x, w, out, n, m, k, out_type, accumulate, stream);
    return gemv_bf16(x, w, out, n, m, k, out_type, accumulate, stream);
  }
  const float alpha = 1.0f, beta = accumulate ? 1.0f : 0.0f;
  check_lt(cublasLtMatmul(static_cast<cublasLtHandle_t>(handle_), plan.op, &alpha, w, plan.a, x, plan.b, &beta, out,
                          plan.c, out, plan.c, &plan.algo, workspace_, workspace_bytes_, stream),
           "matmul");
}

void Gemm::prepare(const void* x, const void* w, int64_t n, int64_t m, int64_t k, GemmOut out_type, bool accumulate,
                   cudaStream_t stream) {
  if (n > 0) plan_for(n, m, k, out_type, accumulate, x, w, stream);
}

void Gemm::run(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, GemmOut out_type,
               bool accumulate, cudaStream_t stream) {
  if (n == 0) return;
  EXACTLY_CUDA_REQUIRE(!accumulate || out_type == GemmOut::f32, "gemm: accumulating needs an fp32 output");
  launch(plan_for(n, m, k, out_type, accumulate, x, w, stream), x, w, out, n, m, k, out_type, accumulate, stream);
}

}  // namespace exactly::kernels::cuda
