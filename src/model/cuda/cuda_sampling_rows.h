// Internal to model/cuda: the jobs on a step's logits rows that run on the
// GPU (model/forward_batch.h's RowJobs): sampling by the host Sampler's rule,
// processing (logit_bias, a grammar's mask) before it, and sampled verifies
// of speculative drafts, with the device arrays each takes.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

#include "kernels/cuda/device_buffer.h"
#include "model/forward_batch.h"

namespace exactly {

class CudaSamplingRows {
 public:
  // A verify's draft-distribution space: kSparseDraftEntries per draft of
  // every sequence, or kDenseDraftRows whole-vocabulary distributions.
  static constexpr int64_t kSparseDraftEntries = 64;
  static constexpr int64_t kDenseDraftRows = 16;

  // Sizes the arrays for steps of `tokens` rows and `seqs` verifies, the
  // kernels' scratch for chunks of `logits_rows` rows of `vocab` logits.
  void resize(int64_t tokens, int32_t seqs, int32_t logits_rows, int32_t vocab);
  // Draft-distribution entries a step's verifies may carry.
  int64_t q_capacity() const { return q_capacity_; }
  size_t bytes() const;

  // Uploads the sampling parameters of every logits row (kLogits and kArgmax
  // rows as plain greedy ones, which leaves their logits as they are).
  void upload_sampling(const ForwardBatch& b, cudaStream_t stream);
  // Uploads the processed rows' jobs, biases and masks, once the masks are filled.
  void upload_processing(const RowJobs& jobs, int32_t vocab, cudaStream_t stream);
  void upload_verifies(const ForwardBatch& b, cudaStream_t stream);

  // On a chunk of logits rows [first, first + rows) of the step, held in
  // `logits` ([rows, vocab] fp32):
  // the processed rows' biases and masks, in place;
  void process(float* logits, int64_t first, int64_t rows, int32_t vocab, int32_t jobs, cudaStream_t stream) const;
  // each row's sample into tokens[first + r] (tokens: [logits_rows] device);
  void sample(float* logits, int64_t first, int64_t rows, int32_t vocab, int32_t* tokens, cudaStream_t stream) const;
  // and the verifies (whose rows all sit in one chunk: `logits` holds rows from 0).
  void run_verifies(const RowJobs& jobs, float* logits, int32_t vocab, cudaStream_t stream);
  // Copies the verifies' outcomes back to the host, then, once the stream
  // is synchronised, writes each job's rows of `tokens`: the emitted tokens
  // (accepted drafts, then the replacement or bonus token), then -1.
  void download_outcomes(size_t jobs, cudaStream_t stream);
  void write_verified_tokens(const RowJobs& jobs, int32_t* tokens) const;

 private:
  int32_t seqs_ = 0;
  // Sampling: per-row parameters, penalty tokens (grown on demand) and the
  // kernels' scratch.
  kernels::cuda::DeviceBuffer sampling_, penalties_, scratch_;
  kernels::cuda::PinnedBuffer sampling_staging_, penalties_staging_;
  // Rows processed before sampling: jobs | biases | masks (grown on demand).
  kernels::cuda::DeviceBuffer processing_;
  kernels::cuda::PinnedBuffer processing_staging_;
  size_t off_biases_ = 0, off_masks_ = 0;
  // Verifies: their rows' parameters, then jobs | drafts | q offsets |
  // q entries | uniforms | accepted | tokens, for `seqs_` jobs.
  kernels::cuda::DeviceBuffer verify_params_, verify_;
  kernels::cuda::PinnedBuffer verify_params_staging_, verify_staging_;
  size_t off_jobs_ = 0, off_drafts_ = 0, off_q_offsets_ = 0, off_q_entries_ = 0, off_uniforms_ = 0, off_accepted_ = 0,
         off_final_ = 0, verify_bytes_ = 0;
  int64_t q_capacity_ = 0;
};

}  // namespace exactly
