// The training backward, recomputing P = exp(scale * q k^T - lse) per tile:
//   D_i  = sum_d dO_i[d] * O_i[d]
//   dV_j = sum_i P_ij dO_i           dP_ij = dO_i . V_j
//   dS_ij = P_ij (dP_ij - D_i)
//   dK_j = scale * sum_i dS_ij Q_i   dQ_i = scale * sum_j dS_ij K_j
// Three launches in order on one stream: D (here), then dK and dV
// (flash_train_dkdv.cu), then dQ (flash_train_dq.cu). Each gradient pass
// recomputes the tiles it needs, so neither writes into the other's outputs.
#include "kernels/cuda/flash_train.h"
#include "kernels/cuda/flash_train_launch.h"
#include "kernels/cuda/flash_train_tiles.cuh"

namespace exactly::kernels::cuda::flash_train {
namespace {

constexpr int kDeltaRowsPerWarp = 4;
constexpr int kDeltaRowsPerCta = kDeltaRowsPerWarp * kWarps;

// D of one query row of every head: a warp per row, each lane summing D / 32
// adjacent elements in fp32, then the lanes combined by a fixed butterfly.
template <typename T, int D>
__device__ __forceinline__ void delta_of_row(const BackwardParams& p, int64_t row) {
  const int lane = threadIdx.x % 32;
  const int64_t stride = int64_t{p.n_heads} * D;
  const T* o = static_cast<const T*>(p.out) + row * stride + lane * (D / 32);
  const T* g = static_cast<const T*>(p.d_out) + row * stride + lane * (D / 32);
  for (int head = 0; head < p.n_heads; ++head) {
    float sum = 0.f;
#pragma unroll
    for (int e = 0; e < D / 32; ++e) sum += Elem<T>::to_float(o[head * D + e]) * Elem<T>::to_float(g[head * D + e]);
#pragma unroll
    for (int mask = 16; mask > 0; mask /= 2) sum += __shfl_xor_sync(0xffffffffu, sum, mask);
    if (lane == 0) p.delta[row * p.n_heads + head] = sum;
  }
}

template <typename T, int D>
__global__ void __launch_bounds__(kThreads) delta_kernel(const BackwardParams p) {
  const SeqSpan s = seq_span(p, blockIdx.y);
  const int warp = threadIdx.x / 32;
  for (int i = 0; i < kDeltaRowsPerWarp; ++i) {
    const int row = blockIdx.x * kDeltaRowsPerCta + i * kWarps + warp;
    if (row < s.lq && s.q0 + row < p.delta_rows) delta_of_row<T, D>(p, s.q0 + row);
  }
}

template <typename T, int D>
void launch_delta(const BackwardParams& p, const FlashTrainShape& s, cudaStream_t stream) {
  const dim3 grid(ceil_div(s.max_q_len, kDeltaRowsPerCta), s.n_seqs);
  delta_kernel<T, D><<<grid, kThreads, 0, stream>>>(p);
  check_launch("flash_train_backward: D = rowsum(dO * O)");
}

void check_backward_pointers(const void* q, const void* k, const void* v, const void* out, const void* d_out,
                             const float* lse, FlashTrainGradients grads) {
  constexpr const char* kOp = "flash_train_backward";
  check_rows(q, "q", kOp), check_rows(k, "k", kOp), check_rows(v, "v", kOp);
  check_rows(out, "out", kOp), check_rows(d_out, "d_out", kOp);
  check_rows(grads.dq, "dq", kOp), check_rows(grads.dk, "dk", kOp), check_rows(grads.dv, "dv", kOp);
  EXACTLY_CUDA_REQUIRE(lse != nullptr, "%s: lse is null", kOp);
}

// The host cannot read cu_q[n_seqs]; n_seqs * max_q_len bounds it, so a
// workspace of that many rows holds every row's D, and a smaller one is
// refused rather than left to give some rows wrong gradients.
void check_workspace(const FlashTrainShape& s, const void* workspace, int64_t workspace_bytes) {
  constexpr const char* kOp = "flash_train_backward";
  if (s.max_q_len == 0) return;
  EXACTLY_CUDA_REQUIRE(workspace != nullptr && aligned16(workspace), "%s: workspace is null or not 16-byte aligned",
                       kOp);
  const int64_t needed = flash_train_backward_workspace_bytes(int64_t{s.n_seqs} * s.max_q_len, s.n_heads);
  EXACTLY_CUDA_REQUIRE(workspace_bytes >= needed,
                       "%s: workspace of %lld bytes, %lld needed (%d sequences of up to %d queries, %d heads)", kOp,
                       static_cast<long long>(workspace_bytes), static_cast<long long>(needed), s.n_seqs, s.max_q_len,
                       s.n_heads);
}

}  // namespace
}  // namespace exactly::kernels::cuda::flash_train

namespace exactly::kernels::cuda {

int64_t flash_train_backward_workspace_bytes(int64_t rows, int n_heads) {
  return rows * n_heads * static_cast<int64_t>(sizeof(float));
}

void flash_train_backward(const FlashTrainShape& shape, float scale, const void* q, const void* k, const void* v,
                          const void* out, const void* d_out, const float* lse, FlashTrainGradients grads,
                          void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  using namespace flash_train;
  check_shape(shape, scale, "flash_train_backward");
  if (shape.n_seqs == 0) return;
  check_backward_pointers(q, k, v, out, d_out, lse, grads);
  check_workspace(shape, workspace, workspace_bytes);
  const int64_t delta_rows = workspace_bytes / flash_train_backward_workspace_bytes(1, shape.n_heads);
  const BackwardParams p{varlen_params(shape, scale, q, k, v),
                         out,
                         d_out,
                         lse,
                         static_cast<float*>(workspace),
                         delta_rows,
                         grads.dq,
                         grads.dk,
                         grads.dv};
  with_element_type(shape.dtype, [&](auto type) {
    using T = typename decltype(type)::type;
    with_head_dim(shape.head_dim, [&](auto d) {
      if (shape.max_q_len > 0) launch_delta<T, decltype(d)::value>(p, shape, stream);
    });
  });
  if (shape.max_k_len > 0) launch_key_tile_gradients(p, shape, stream);  // dK, dV: every key row, seen or not
  if (shape.max_q_len > 0) launch_query_tile_gradients(p, shape, stream);
}

}  // namespace exactly::kernels::cuda
