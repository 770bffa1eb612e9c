// Matrix products of the linear layers through cuBLASLt: bf16 operands, fp32
// accumulation, output in bf16 or fp32 (optionally added to what is there:
// the residual connection fused into the product's epilogue). The algorithm
// for each shape is chosen once, on first use, and pinned for the process;
// with `deterministic`, one algorithm without split-K is pinned for every
// number of rows of a weight, so a row's bits do not depend on the batch.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>
#include <map>
#include <memory>
#include <tuple>

namespace exactly::kernels::cuda {

enum class GemmOut : int { bf16 = 0, f32 = 1 };

// The few-row path (decode of a few sequences): a streaming matrix-vector
// kernel for up to kGemvMaxRows rows. Gemm sends products of at most
// `gemv_max_rows` rows to it (never in deterministic mode: its rows' bits
// differ from cuBLASLt's); kGemvDefaultRows is where it beats cuBLASLt on
// the H200 (BENCHMARKS.md).
inline constexpr int kGemvMaxRows = 8;
inline constexpr int kGemvDefaultRows = 1;
bool gemv_applies(int64_t n, int64_t k, const void* x, const void* w);
void gemv_bf16(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, GemmOut out_type,
               bool accumulate, cudaStream_t stream);

class Gemm {
 public:
  explicit Gemm(bool deterministic = false, int gemv_max_rows = kGemvDefaultRows,
                size_t workspace_bytes = size_t{32} << 20);
  ~Gemm();
  Gemm(const Gemm&) = delete;
  Gemm& operator=(const Gemm&) = delete;

  // out[n, m] = x[n, k] · w[m, k]^T (+ out[n, m] when accumulate; f32 only).
  // Row-major throughout; x and w bf16.
  void run(const void* x, const void* w, void* out, int64_t n, int64_t m, int64_t k, GemmOut out_type,
           bool accumulate, cudaStream_t stream);

  size_t workspace_bytes() const { return workspace_bytes_; }

 private:
  struct Plan;
  const Plan& plan_for(int64_t n, int64_t m, int64_t k, GemmOut out_type, bool accumulate);

  bool deterministic_;
  int gemv_max_rows_;
  size_t workspace_bytes_;
  void* workspace_ = nullptr;
  void* handle_ = nullptr;  // cublasLtHandle_t
  std::map<std::tuple<int64_t, int64_t, int64_t, int, bool>, std::unique_ptr<Plan>> plans_;
};

}  // namespace exactly::kernels::cuda
