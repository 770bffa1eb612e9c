// FlashAttention for training on the CPU: a forward pass that saves each query
// row's log-sum-exp (LSE), and a backward pass that recomputes the attention
// probabilities tile by tile from Q, K and that LSE instead of storing the
// N x N matrix. It is the oracle of the CUDA backward, as the CPU twins of the
// inference kernels are of theirs; the double instantiation is what the
// finite-difference gradient checks run on.
//
// Layout: contiguous variable-length batches (FlashAttention's varlen form).
//   q, out, d_out, dq: [cu_q[n_seqs], n_heads, head_dim]
//   k, v, dk, dv:      [cu_k[n_seqs], n_kv_heads, head_dim]
//   lse:               [cu_q[n_seqs], n_heads], natural log
// Sequence s owns query rows cu_q[s]..cu_q[s+1]-1 and key rows
// cu_k[s]..cu_k[s+1]-1; query head h reads KV head h / (n_heads / n_kv_heads).
//
// The causal mask aligns the ends of the two sequences (bottom right, as
// FlashAttention 2 does): query i of a sequence with Lq queries and Lk keys
// sees keys j <= i + Lk - Lq, so a chunk of new queries after a cached prefix
// sees the prefix. A query that sees no key has output 0, LSE -inf and
// contributes no gradient.
//
// Determinism: every output element is written by one task that reduces in a
// fixed order (keys by increasing tile for out and dq; the group's query heads
// in increasing order, then query tiles in increasing order, for dk and dv),
// so the bits depend on neither the thread count nor the schedule. No atomic
// accumulation anywhere: dq is a second pass over the key tiles rather than a
// sum scattered from the key-tile tasks.
//
// Memory: O(N) beyond the inputs and outputs: D = rowsum(dO * O) per query
// row and head, plus fixed-size tiles per task.
#pragma once

#include <cstdint>

namespace exactly {
class ThreadPool;
}

namespace exactly::kernels::cpu::train {

constexpr int kQueryTile = 16;  // query rows per tile
constexpr int kKeyTile = 16;    // keys per tile
constexpr int kMaxHeadDim = 512;

struct VarlenShape {
  int32_t n_seqs = 0;
  const int32_t* cu_q = nullptr;  // [n_seqs + 1] query row offsets, cu_q[0] == 0
  const int32_t* cu_k = nullptr;  // [n_seqs + 1] key row offsets, cu_k[0] == 0
  int32_t n_heads = 0;
  int32_t n_kv_heads = 0;
  int32_t head_dim = 0;
  bool causal = true;
};

// Throws std::invalid_argument naming the first field that is out of range.
void validate(const VarlenShape& shape);

template <typename T>
struct Gradients {
  T* dq;
  T* dk;
  T* dv;
};

// out = softmax(scale * q k^T + mask) v per head; lse = the log of each row's
// softmax denominator, including the max (log sum_j exp(scale * q.k_j)).
template <typename T>
void flash_forward(const VarlenShape& shape, T scale, const T* q, const T* k, const T* v, T* out, T* lse,
                   ThreadPool& pool);

// The gradients of a loss L with respect to q, k and v, given out and lse from
// flash_forward and d_out = dL/d(out). Every element of dq, dk and dv is
// written (keys no query sees get 0).
template <typename T>
void flash_backward(const VarlenShape& shape, T scale, const T* q, const T* k, const T* v, const T* out,
                    const T* d_out, const T* lse, Gradients<T> grads, ThreadPool& pool);

}  // namespace exactly::kernels::cpu::train
