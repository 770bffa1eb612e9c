// Argument checks shared by the attention launchers: everything a kernel
// assumes (16-byte aligned rows, block sizes in whole 16-key chunks, heads in
// whole KV groups) is verified on the host, with the offending value named;
// and the one dispatch on the head dimension that the launchers share.
#pragma once

#include <cstdint>
#include <type_traits>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/cuda_check.h"

namespace exactly::kernels::cuda {

// Lets `kernel` take `bytes` of dynamic shared memory (above the default 48 KB).
// Once per kernel and process: the static lives in each instantiation, so a
// launch on the hot path pays nothing after the first.
template <auto kernel>
void allow_shared_memory(int bytes, const char* op) {
  static const bool done = [&] {
    check_cuda(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, bytes), op);
    return true;
  }();
  (void)done;
}

// Calls f(std::integral_constant<int, D>{}) with the head dimension as a
// constant, 64 or 128 (check_cache refuses any other), so that a launcher
// names each instantiation once: f is a generic lambda that reads
// decltype(d)::value.
template <typename F>
void with_head_dim(int head_dim, F&& f) {
  if (head_dim == 64) return f(std::integral_constant<int, 64>{});
  f(std::integral_constant<int, 128>{});
}

inline bool aligned16(const void* p) { return (reinterpret_cast<uintptr_t>(p) & 15u) == 0; }

inline void check_cache(const PagedKVDevice& c, const char* op) {
  EXACTLY_CUDA_REQUIRE(c.head_dim == 64 || c.head_dim == 128, "%s: head_dim %d (supported: 64, 128)", op,
                       c.head_dim);
  EXACTLY_CUDA_REQUIRE(c.block_size > 0 && c.block_size % 16 == 0, "%s: block_size %d is not a multiple of 16",
                       op, c.block_size);
  EXACTLY_CUDA_REQUIRE(c.n_kv_heads > 0, "%s: %d KV heads", op, c.n_kv_heads);
  EXACTLY_CUDA_REQUIRE(c.dtype == DType::bf16 || c.dtype == DType::f16, "%s: unknown dtype %d", op,
                       static_cast<int>(c.dtype));
  EXACTLY_CUDA_REQUIRE(aligned16(c.k) && aligned16(c.v), "%s: K/V cache pointers are not 16-byte aligned", op);
}

inline void check_attention_args(const PagedKVDevice& c, const AttentionBatchDevice& b, const void* q,
                                 const void* out, int n_heads, const char* op) {
  check_cache(c, op);
  EXACTLY_CUDA_REQUIRE(n_heads > 0 && n_heads % c.n_kv_heads == 0, "%s: %d query heads over %d KV heads", op,
                       n_heads, c.n_kv_heads);
  EXACTLY_CUDA_REQUIRE(b.n_seqs >= 0 && b.n_seqs <= 65535, "%s: %d sequences (at most 65535 per launch)", op,
                       b.n_seqs);
  EXACTLY_CUDA_REQUIRE(b.max_blocks_per_seq > 0, "%s: max_blocks_per_seq %d", op, b.max_blocks_per_seq);
  EXACTLY_CUDA_REQUIRE(int64_t{b.max_seq_len} <= int64_t{b.max_blocks_per_seq} * c.block_size,
                       "%s: max_seq_len %d exceeds the block table (%d blocks of %d)", op, b.max_seq_len,
                       b.max_blocks_per_seq, c.block_size);
  EXACTLY_CUDA_REQUIRE(aligned16(q) && aligned16(out), "%s: q/out pointers are not 16-byte aligned", op);
}

}  // namespace exactly::kernels::cuda
