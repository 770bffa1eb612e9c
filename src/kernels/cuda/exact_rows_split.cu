// exact_rows_attention's split path (kernels in exact_rows_split.cuh): the
// producers its chain runs with, its workspace, its launches.
#include "kernels/cuda/exact_rows_split.h"

#include <cuda_bf16.h>

#include <cstdint>
#include <cstdlib>

#include "kernels/cuda/device_info.h"
#include "kernels/cuda/exact_rows_split.cuh"
#include "kernels/cuda/launch_common.h"

namespace exactly::kernels::cuda {
namespace {

using namespace exact_split;

// The producer warps beside the chain, taking the ring's tiles in turn; 0:
// the lone chain, which issues its own copies between its tiles (a ring of
// kChainStages tiles), the only chain off sm_90, whose machine code here has
// no mbarrier waits. On an H100 (exact_rows_lab, 32 layers of Llama-3-8B,
// 1 x 4,096 keys) the lone chain took 1.36 ms, a ring of 8 fed by 1 / 2 / 4
// producers 1.07 / 0.70 / 0.60. Four help while every chain CTA has an SM
// of its own (engine, 3,968 + 128 tokens, tokens/s with 1 / 2 / 4:
// Llama-3-8B at batch 1, 64 chain CTAs, 136.0 / 143.0 / 144.9; SmolLM2 at
// batch 1, 12 CTAs, 584.7 / 733.1 / 790.8; at batch 16, 192 CTAs, 4,787 /
// 5,471 / 5,370), two beyond. EXACTLY_SPLIT_PRODUCERS (0; 1, 2 or 4 on
// sm_90) forces a count, read once per process, for engine-level comparisons.
int chain_producers(int64_t chain_ctas) {
  static const int forced = [] {
    const char* v = std::getenv("EXACTLY_SPLIT_PRODUCERS");
    const int n = v != nullptr ? std::atoi(v) : -1;
    return n == 0 || (device_compute_major() == 9 && (n == 1 || n == 2 || n == 4)) ? n : -1;
  }();
  if (forced >= 0) return forced;
  if (device_compute_major() != 9) return 0;
  return chain_ctas <= device_multiprocessors() ? 4 : 2;
}

}  // namespace

int64_t exact_rows_split_chain_slots() {
  static_assert(kChainCols == kExactSplitChainCols, "the route counts the chain's CTAs by its columns");
  const int stages = chain_producers(0) > 0 ? kProducerStages : kChainStages;
  const int64_t smem = device_attribute(cudaDevAttrMaxSharedMemoryPerMultiprocessor, "shared memory per SM");
  return smem / (int64_t{stages} * kStageBytes + kReservedSharedBytes) * device_multiprocessors();
}

int64_t exact_rows_split_bytes(int n_seqs, int n_kv_heads, int group, int max_query_len, int max_seq_len) {
  return SplitLayout(n_seqs, n_kv_heads, SplitShape(group, max_query_len, max_seq_len)).bytes();
}

void exact_rows_split(const PagedKVDevice& cache, const AttentionBatchDevice& batch, const void* q, int n_heads,
                      float scale, void* out, void* workspace, int64_t workspace_bytes, cudaStream_t stream) {
  check_attention_args(cache, batch, q, out, n_heads, "exact_rows_attention");
  EXACTLY_CUDA_REQUIRE(cache.dtype == DType::bf16, "exact_rows_attention: bf16 caches only");
  if (batch.n_seqs == 0 || batch.max_query_len <= 0 || batch.max_seq_len <= 0) return;
  const ExactRowsParams p = paged_attention_params<__nv_bfloat16>(cache, batch, q, out, n_heads, scale);
  const SplitShape shape(p.group, batch.max_query_len, batch.max_seq_len);
  const SplitLayout layout(batch.n_seqs, p.n_kv_heads, shape);
  EXACTLY_CUDA_REQUIRE(workspace != nullptr && workspace_bytes >= layout.bytes(),
                       "exact_rows_attention: workspace of %lld bytes, %lld needed", (long long)workspace_bytes,
                       (long long)layout.bytes());
  EXACTLY_CUDA_REQUIRE(int64_t{batch.n_seqs} * shape.row_groups <= 65535,
                       "exact_rows_attention: %d sequences of %d row groups", batch.n_seqs, shape.row_groups);
  const SplitArrays a = split_arrays(workspace, layout, shape);
  with_head_dim(cache.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    switch (chain_producers(int64_t{D / kChainCols} * p.n_kv_heads * batch.n_seqs * shape.row_groups)) {
      case 0: return launch<D, kChainStages, 0>(p, a, batch.n_seqs, batch.max_seq_len, stream);
      case 1: return launch<D, kProducerStages, 1>(p, a, batch.n_seqs, batch.max_seq_len, stream);
      case 4: return launch<D, kProducerStages, 4>(p, a, batch.n_seqs, batch.max_seq_len, stream);
      default: return launch<D, kProducerStages, 2>(p, a, batch.n_seqs, batch.max_seq_len, stream);
    }
  });
}

}  // namespace exactly::kernels::cuda
