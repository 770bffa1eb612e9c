// Launcher of split-KV paged decode: one CTA per (partition, KV head and row
// group, sequence), then the log-sum-exp merge for sequences longer than one
// partition. The workspace is the caller's, so nothing is allocated per step.
#include "kernels/cuda/attention.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/paged_decode_kernel.cuh"

namespace exactly::kernels::cuda {
namespace {

// Chosen in dev/cuda (attention_lab, NOTES.md): the query fragments are
// re-read from shared memory so that three CTAs fit on an SM, and two stages
// per warp keep 3 x 4 x 2 chunks (192 KB) of K/V in flight per SM.
constexpr int kWarps = 4;
constexpr int kStages = 2;
constexpr bool kQInRegisters = false;
constexpr int kCtasPerSM = 3;
constexpr int kMergeGroups = 8;

int max_partitions(int max_seq_len) { return decode_partitions_bound(max_seq_len); }

// Keys per partition for the whole batch, or 0 for each sequence's own
// decode_partition. A batch with enough work for six CTAs per SM in 1024-key
// partitions uses them: fewer CTA starts and merges, +1% at 64 x 2048 and
// 16 x 8192 (lab decode v8/v9), and a context of at most 1024 keys then needs
// no merge at all. A batch that fills the GPU twice over with 512-key
// partitions uses those (a batch-128 step at context 576 took 8.61 ms with
// 128-key partitions, 8.04 with 512; dev/cuda/step_lab.cu). A smaller batch
// sizes each sequence's partitions from its length (decode_partition).
int batch_partition(const AttentionBatchDevice& b, int n_kv_heads, int row_groups) {
  auto ctas = [&](int part) {
    return int64_t{b.n_seqs} * n_kv_heads * row_groups * ((b.max_seq_len + part - 1) / part);
  };
  if (ctas(1024) >= 6 * int64_t{device_multiprocessors()}) return 1024;
  return ctas(512) >= 2 * int64_t{device_multiprocessors()} ? 512 : 0;
}

template <typename T, int D>
void launch(const PagedKVDevice& c, const AttentionBatchDevice& b, const void* q, int n_heads, float scale,
            void* out, void* workspace, cudaStream_t stream) {
  using Shape = DecodeShape<D, kWarps, kStages>;
  constexpr auto kernel = paged_decode_kernel<T, D, kWarps, kStages, 0, kQInRegisters, kCtasPerSM>;
  allow_shared_memory<kernel>(Shape::kSmemBytes, "paged_decode_attention: shared memory limit");
  const int group = n_heads / c.n_kv_heads;
  const int row_groups = (group + 15) / 16;
  const int part_len = batch_partition(b, c.n_kv_heads, row_groups);
  const int parts = part_len > 0 ? (b.max_seq_len + part_len - 1) / part_len : max_partitions(b.max_seq_len);
  float* partial_out = static_cast<float*>(workspace);
  float* partial_lse = partial_out + int64_t{b.n_seqs} * n_heads * parts * D;
  const DecodeParams p{paged_attention_params<void>(c, b, q, out, n_heads, scale), row_groups, parts, partial_out,
                       partial_lse, part_len};
  launch_dependent("paged_decode_attention", LaunchRole::kOther, kernel,
                   dim3(parts, c.n_kv_heads * row_groups, b.n_seqs), Shape::kThreads, Shape::kSmemBytes, stream, p);
  // Eight groups share the merge of a row of kGroupedMergeParts partitions or
  // more (32k keys in 512-key partitions); shorter rows keep one group.
  if (parts >= kGroupedMergeParts)
    launch_dependent("paged_decode_attention: merge", LaunchRole::kOther,
                     merge_partitions_kernel<T, D, 0, kMergeGroups>, dim3(n_heads, b.n_seqs), D * kMergeGroups, 0,
                     stream, p);
  else if (parts > 1)
    launch_dependent("paged_decode_attention: merge", LaunchRole::kOther,
                     merge_partitions_kernel<T, D, 0>, dim3(n_heads, b.n_seqs), D, 0, stream, p);
}

}  // namespace

int64_t decode_workspace_bytes(int n_seqs, int n_heads, int max_seq_len, int head_dim) {
  const int64_t rows = int64_t{n_seqs} * n_heads * max_partitions(max_seq_len);
  return rows * (head_dim + 1) * int64_t{sizeof(float)};
}

void paged_decode_attention(const PagedKVDevice& cache, const AttentionBatchDevice& batch, const void* q,
                            int n_heads, float scale, void* out, void* workspace, int64_t workspace_bytes,
                            cudaStream_t stream) {
  check_attention_args(cache, batch, q, out, n_heads, "paged_decode_attention");
  if (batch.n_seqs == 0 || batch.max_seq_len <= 0) return;
  const int64_t need = decode_workspace_bytes(batch.n_seqs, n_heads, batch.max_seq_len, cache.head_dim);
  EXACTLY_CUDA_REQUIRE(max_partitions(batch.max_seq_len) == 1 || (workspace != nullptr && workspace_bytes >= need),
                       "paged_decode_attention: workspace of %lld bytes, %lld needed", (long long)workspace_bytes,
                       (long long)need);
  EXACTLY_CUDA_REQUIRE(int64_t{cache.n_kv_heads} * ((n_heads / cache.n_kv_heads + 15) / 16) <= 65535,
                       "paged_decode_attention: too many heads (%d)", n_heads);
  with_head_dim(cache.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    cache.dtype == DType::bf16 ? launch<__nv_bfloat16, D>(cache, batch, q, n_heads, scale, out, workspace, stream)
                               : launch<__half, D>(cache, batch, q, n_heads, scale, out, workspace, stream);
  });
}

}  // namespace exactly::kernels::cuda
