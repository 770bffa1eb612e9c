// FlashAttention for training on NVIDIA GPUs (tensor cores through mma.sync
// m16n8k16, sm_80 and later): the CUDA twin of kernels/cpu/flash_train.h. A
// forward pass that saves each query row's log-sum-exp (LSE), and a backward
// pass that recomputes the attention probabilities tile by tile from Q, K and
// that LSE (FlashAttention-2's algorithm) instead of storing the N x N matrix.
// Inputs and outputs are bf16 or fp16; every product accumulates in fp32.
//
// Layout: contiguous variable-length batches (FlashAttention's varlen form).
//   q, out, d_out, dq: [cu_q[n_seqs], n_heads, head_dim]
//   k, v, dk, dv:      [cu_k[n_seqs], n_kv_heads, head_dim]
//   lse:               [cu_q[n_seqs], n_heads], fp32, natural log
// Sequence s owns query rows cu_q[s]..cu_q[s+1]-1 and key rows
// cu_k[s]..cu_k[s+1]-1; query head h reads KV head h / (n_heads / n_kv_heads).
// head_dim is 64 or 128.
//
// The causal mask aligns the ends of the two sequences (bottom right, as
// FlashAttention 2 does): query i of a sequence with Lq queries and Lk keys
// sees keys j <= i + Lk - Lq. A query that sees no key has output 0, LSE -inf
// and contributes no gradient.
//
// Determinism: every output element is written once, by one thread, from fp32
// accumulators fed in a fixed order (keys by increasing 64-key tile for out
// and dq; the group's query heads in increasing order, then query tiles in
// increasing order, for dk and dv). No atomics: dq is a pass of its own over
// the key tiles rather than a sum scattered from the key-tile CTAs, so two
// runs on the same inputs give the same bits whatever the schedule.
//
// Memory: O(N) beyond the inputs and outputs: the workspace holds
// D = rowsum(dO * O) per query row and head, in fp32.
//
// All pointers are device pointers, cu_q and cu_k included. Launches are
// asynchronous on `stream`; argument errors throw exactly::Error before any
// launch, launch errors throw with the CUDA error string.
#pragma once

#include <cuda_runtime.h>

#include <cstdint>

#include "kernels/cuda/attention.h"

namespace exactly::kernels::cuda {

struct FlashTrainShape {
  int32_t n_seqs = 0;             // at most 65535
  const int32_t* cu_q = nullptr;  // [n_seqs + 1] query row offsets, cu_q[0] == 0
  const int32_t* cu_k = nullptr;  // [n_seqs + 1] key row offsets, cu_k[0] == 0
  // Host-known bounds on every sequence's query and key counts: the grids are
  // sized from them, so rows past them are never computed.
  int32_t max_q_len = 0;
  int32_t max_k_len = 0;
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;  // 64 or 128
  DType dtype = DType::bf16;
  bool causal = true;
};

struct FlashTrainGradients {
  void* dq;
  void* dk;
  void* dv;
};

// out = softmax(scale * q k^T + mask) v per head; lse = the natural log of
// each row's softmax denominator, including the max (log sum_j exp(scale *
// q.k_j)). Rows of q, k, v and out are 16-byte aligned; lse is fp32.
void flash_train_forward(const FlashTrainShape& shape, float scale, const void* q, const void* k, const void* v,
                         void* out, float* lse, cudaStream_t stream);

// Bytes of the backward's workspace for `rows` query rows: one fp32 D per
// query row and head. The backward asks for n_seqs * max_q_len rows, the
// bound on cu_q[n_seqs] that the host knows.
int64_t flash_train_backward_workspace_bytes(int64_t rows, int n_heads);

// The gradients of a loss L with respect to q, k and v, given out and lse from
// flash_train_forward and d_out = dL/d(out). Every element of dq, dk and dv is
// written (keys no query sees get 0). workspace: 16-byte aligned, at least
// flash_train_backward_workspace_bytes(n_seqs * max_q_len, n_heads) bytes;
// a smaller one is refused.
void flash_train_backward(const FlashTrainShape& shape, float scale, const void* q, const void* k, const void* v,
                          const void* out, const void* d_out, const float* lse, FlashTrainGradients grads,
                          void* workspace, int64_t workspace_bytes, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
