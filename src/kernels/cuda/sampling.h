// Sampling on the GPU with the host sampler's semantics (sample/sampler.cc):
// penalties, temperature, top-k, top-p, min-p, then an inverse-CDF draw with
// a uniform the host supplies, so that a row gives the token the host would
// give for the same logits, context and draw. Only a draw whose uniform lies
// within rounding (about 1e-12) of a boundary between two tokens' shares, or
// a top-p within rounding of a prefix's mass, can go the other way: the sums
// are in another order than the host's.
//
// Each row is sampled by one thread block in a fixed order, so its token
// never depends on the other rows of the batch or on timing.
//
// Outside the host's contract (where its own result is no distribution):
// NaN logits count as below -inf with probability 0; a row whose largest
// logit is not finite (+inf, or all -inf or NaN) gives its argmax, the lowest
// id among the largest; min_p > 1 keeps the most likely token.
#pragma once

#include <cuda_runtime.h>

#include <cstddef>
#include <cstdint>

namespace exactly::kernels::cuda {

struct SampleRowParams {      // one row; plain old data, uploaded as an array
  float temperature;          // <= 0: greedy (argmax of the penalised logits)
  int32_t top_k;              // <= 0: off
  float top_p;                // >= 1: off
  float min_p;                // <= 0: off
  float repetition_penalty;   // 1: off
  float frequency_penalty;
  float presence_penalty;
  int32_t penalty_begin;      // this row's entries in the penalty array: [begin, end)
  int32_t penalty_end;
  double uniform;             // the row's draw, in [0, 1)
};

struct PenaltyEntry {         // one distinct token of a row's context
  int32_t id;                 // outside [0, vocab): ignored
  int32_t output_count;       // occurrences in the generated part (frequency/presence)
  int32_t in_window;          // 1 when inside the repetition window (repetition penalty)
};

// The largest vocabulary sample_rows() takes.
constexpr int32_t kSamplingMaxVocab = 1 << 24;

size_t sampling_workspace_bytes(int64_t rows, int32_t vocab);

// Samples one token per row. `logits` [rows, vocab] f32 on the device is
// overwritten with the processed logits: penalties applied, and divided by
// the temperature unless the row is greedy (as the host's greedy path skips
// it). `params` [rows] and `penalties` are device arrays (penalties may be
// null when no row has entries; a row's entries must have distinct ids);
// `tokens` [rows] receives the draws. `workspace` holds
// sampling_workspace_bytes(rows, vocab) bytes, 8-byte aligned.
void sample_rows(float* logits, int64_t rows, int32_t vocab, const SampleRowParams* params,
                 const PenaltyEntry* penalties, int32_t* tokens, void* workspace, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
