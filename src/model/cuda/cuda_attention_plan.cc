#include "model/cuda/cuda_attention_plan.h"

namespace exactly {

namespace kc = kernels::cuda;

// A decode step is one launch of the decode kernel. A step with prompt work
// launches the prefill kernel for its runs of prompt chunks and verifies and
// the decode kernel for its runs of decode rows: in the prefill kernel a
// decode row fills one row of a query block of 64-128 per head, and every key
// tile costs the whole block's products (docs/journal/benchmarks-record.md
// §6, "Decode rows in prompt steps"). In the canonical order (the default) a
// row must have the prefill kernel's bits whatever run it lands in, so decode
// rows go to exact_rows_attention, which computes them with the same bits
// (checked element by element in dev/cuda/exact_rows_lab.cu) in whichever of
// its paths or the prefill kernel is fastest for the run (dev/cuda/NOTES.md,
// "Exact rows in windows"); --no-deterministic sends them to the split-KV
// kernel.
CudaAttentionPlan::Kernel CudaAttentionPlan::decode_kernel() const {
  return deterministic_ ? Kernel::kExactRows : Kernel::kSplitDecode;
}

void CudaAttentionPlan::plan_uniform(const kc::AttentionBatchDevice& attn, int32_t query) {
  launches_.clear();
  launches_.push_back({attn, query == 1 ? decode_kernel() : Kernel::kPrefill});
}

void CudaAttentionPlan::plan(const ModelInput& b, const kc::AttentionBatchDevice& attn, bool decode) {
  if (decode) return plan_uniform(attn, 1);
  launches_.clear();
  constexpr int kMaxAttentionLaunches = 4;
  split_attention_runs(b.query_start, b.seq_lens, kMaxAttentionLaunches, runs_);
  for (const AttentionRun& run : runs_) {
    kc::AttentionBatchDevice part = attn;
    part.n_seqs = run.num_seqs;
    part.query_start = attn.query_start + run.first_seq;
    part.seq_lens = attn.seq_lens + run.first_seq;
    part.block_tables = attn.block_tables + int64_t{run.first_seq} * attn.max_blocks_per_seq;
    part.max_query_len = run.max_query_len;
    part.max_seq_len = run.max_seq_len;
    launches_.push_back({part, run.single_token ? decode_kernel() : Kernel::kPrefill});
  }
}

void CudaAttentionPlan::run(const kc::PagedKVDevice& cache, const void* q, int n_heads, float scale, void* out,
                            cudaStream_t stream) const {
  for (const Launch& a : launches_) {
    switch (a.kernel) {
      case Kernel::kSplitDecode:
        kc::paged_decode_attention(cache, a.batch, q, n_heads, scale, out, decode_, decode_bytes_, stream);
        break;
      case Kernel::kExactRows:
        kc::exact_rows_attention(cache, a.batch, q, n_heads, scale, out, stream, kc::ExactRowsPath::kAuto, decode_,
                                 decode_bytes_);
        break;
      case Kernel::kPrefill: kc::flash_attention_prefill(cache, a.batch, q, n_heads, scale, true, out, stream); break;
    }
  }
}

}  // namespace exactly
