// Matrix products of the linear layers: bf16 operands, fp32 accumulation,
// output in bf16 or fp32 (optionally added to what is there: the residual
// connection fused into the product's epilogue).
//
// The canonical order sums each output in one fp32 accumulator fed by the
// tensor core's k16 steps from k = 0 upwards, with no split of k. It is the
// order of every cuBLASLt algorithm without split-K, of wgmma at any N and of
// mma.sync, with either operand as A (dev/cuda/order_lab.cu checks each, bit
// for bit), so a row's bits depend on the row and the weight alone: never on
// the number of rows, the kernel chosen for them, or the rest of the batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>
#include <vector>

namespace exactly::kernels::cuda {

enum class GemmOut : int { bf16 = 0, f32 = 1 };

// The fastest order's few-row path: a streaming matrix-vector kernel on CUDA
// cores for up to kGemvMaxRows rows (its sums are not the canonical order's);
// kGemvDefaultRows is where it beats cuBLASLt on the H200
// (docs/journal/benchmarks-record.md §6).
inline constexpr int kGemvMaxRows = 8;
inline constexpr int kGemvDefaultRows = 1;
bool gemv_applies(int64_t n, int64_t k, const void* x, const void* w);
void gemv_bf16(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, GemmOut out_type,
               bool accumulate, cudaStream_t stream);

enum class GemmOrder {
  // One order for every row count: gemm_rows.h up to kGemmRowsMax rows,
  // cuBLASLt's fastest algorithm without split-K beyond (timed per shape
  // where both apply).
  kCanonical,
  // Whatever is fastest at each row count: the streaming single-row kernel
  // (CUDA cores), cuBLASLt's first heuristic choice (split-K included). A
  // row's bits depend on how many rows share the call.
  kFastest,
};

class Gemm {
 public:
  // `few_rows`: how many rows at most go to the few-row kernel of the order
  // (gemm_rows in canonical order, the streaming kernel in the fastest);
  // -1 takes the order's default, 0 sends every product to cuBLASLt.
  explicit Gemm(GemmOrder order = GemmOrder::kCanonical, int few_rows = -1,
                size_t workspace_bytes = size_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out[n, m] = x[n, k] · w[m, k]^T (+ out[n, m] when accumulate; f32 only).
  // Row-major throughout; x and w bf16.
  void run(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, GemmOut out_type,
           bool accumulate, cudaStream_t stream);

  // Makes run()'s plan for this shape now (timing the candidates of its row
  // bucket, in canonical order) without computing the product; x and w are
  // read, nothing else is written.
  void prepare(const void* x, const void* w, int64_t n, int64_t m, int64_t k, GemmOut out_type, bool accumulate,
               cudaStream_t stream);

  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  struct Plan;
  struct Candidate;
  // Made on first use of a shape, outside graph capture (it may time kernels).
  const Plan& plan_for(int64_t n, int64_t m, int64_t k, GemmOut out_type, bool accumulate, const void* x,
                       const void* w, cudaStream_t stream);
  size_t fastest_candidate(Plan& plan, const std::vector<Candidate>& candidates, int64_t n, int64_t m, int64_t k,
                           GemmOut out_type, bool accumulate, const void* x, const void* w, cudaStream_t stream);
  void launch(const Plan& plan, const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k,
              GemmOut out_type, bool accumulate, cudaStream_t stream);

  GemmOrder order_;
  int few_rows_;
  size_t workspace_bytes_;
  void* workspace_ = nullptr;
  void* handle_ = nullptr;  // cublasLtHandle_t
  std::map<std::tuple<int64_t, int64_t, int64_t, int, bool>, std::unique_ptr<Plan>> plans_;
  // The timed choice of canonical products, per row bucket (the row count
  // rounded up to a power of two) and shape: the candidate's index, so that
  // a step of any size times a shape at most once per bucket.
  std::map<std::tuple<int64_t, int64_t, int64_t, int, bool>, size_t> tuned_;
};

}  // namespace exactly::kernels::cuda
