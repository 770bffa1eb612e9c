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

// What a row is changed by before it is sampled (row_processing.cu), as the
// host's process_row (engine/output_constraint.h) changes it: its bias
// entries added in order, then every token its mask leaves out set to -inf.
struct ProcessRowJob {        // plain old data, uploaded as an array
  int32_t row;                // logits row
  int32_t bias_begin;         // biases[bias_begin, bias_end)
  int32_t bias_end;
  int32_t mask;               // masks[mask * words, + words), words = ceil(vocab / 32); -1: none
};

struct LogitBiasEntry {       // id in [0, vocab)
  int32_t id;
  float bias;
};

// Processes the jobs' rows that lie in [first_row, first_row + rows) of the
// batch, `logits` being the first of those rows ([rows, vocab] f32 on the
// device); jobs outside are skipped. A bit t % 32 of word t / 32 of a mask set
// means token t is allowed. Rows of distinct jobs must be distinct. `jobs`,
// `biases` and `masks` are device arrays (biases or masks may be null when no
// job has any).
void process_rows(float* logits, int64_t first_row, int64_t rows, int32_t vocab, const ProcessRowJob* jobs,
                  int32_t num_jobs, const LogitBiasEntry* biases, const uint32_t* masks, cudaStream_t stream);

// Speculative decoding's verification of sampled drafts (spec_verify.cu),
// with the host's semantics (speculative/rejection_sampler.h, acceptance_rule.h):
// modified rejection sampling against the target distributions p_1..p_{k+1},
// each a logits row processed as sample_rows processes it. For i = 1..k,
// draft x_i is accepted when U_{i-1} < min(1, p_i(x_i) / q_i(x_i)) (0 when
// q_i(x_i) is 0); at the first rejection the replacement is drawn with U_i
// from max(0, p_i - q_i) in p_i's order (decreasing logit then increasing id
// with top-k or top-p, else id order), or from p_i where that has no mass;
// when all k are accepted the bonus token is drawn with U_k from p_{k+1}.
// Like the host, the draws land on the first token whose running weight
// exceeds u times the total, or on the last of positive weight.
//
// Probabilities are in double as the host computes them, only summed in
// another order: an acceptance whose uniform lies within rounding (about
// 1e-12) of min(1, p/q), or a draw's within rounding of a boundary, can go
// the other way. A greedy row (temperature <= 0) counts as one-hot at its
// argmax, as the host's Sampler::distribution gives it.
struct VerifyJob {            // one request's drafts; plain old data, uploaded as an array
  int32_t first_row;          // rows first_row .. first_row + num_drafts of the logits and params
  int32_t num_drafts;         // k >= 1
  int32_t draft_begin;        // drafts[draft_begin .. + k): the draft tokens x_1..x_k
  int32_t q_begin;            // q_offsets[q_begin .. q_begin + k]: q_i's entries are
                              // q_entries[q_offsets[q_begin + i - 1] .. q_offsets[q_begin + i])
  int32_t uniform_begin;      // uniforms[uniform_begin .. + k + 1): U_0..U_k, in [0, 1)
  int32_t pad;
};

struct DraftProb {            // one entry of a draft distribution: ids distinct within it
  int32_t id;
  int32_t pad;
  double p;
};

size_t verify_workspace_bytes(int64_t rows, int32_t vocab);

// Verifies `num_jobs` jobs. `logits` [rows, vocab] f32 is overwritten with
// the processed logits of every row some job verifies (rows no job claims are
// left as they are); `params` [rows] and `penalties` as for sample_rows (the
// uniform field is not read); `q_entries` may be null when every draft
// distribution is empty. A one-hot draft distribution (an n-gram draft) is
// the single entry (x_i, 1.0). `accepted` [num_jobs] receives the number of
// drafts kept, 0..k, and `tokens` [num_jobs] the replacement or bonus token
// that follows them. A job whose rows are not inside [0, rows), or that
// shares a row with an earlier job whose rows are, gets -1 in both and leaves
// the rows it holds alone; the other offsets and the arrays' sizes are the
// caller's to keep right. `workspace` holds verify_workspace_bytes(rows,
// vocab) bytes, 8-byte aligned. All arrays are on the device. A job's result
// never depends on the other jobs.
void verify_drafts(float* logits, int64_t rows, int32_t vocab, const SampleRowParams* params,
                   const PenaltyEntry* penalties, const VerifyJob* jobs, int32_t num_jobs, const int32_t* drafts,
                   const int32_t* q_offsets, const DraftProb* q_entries, const double* uniforms, int32_t* accepted,
                   int32_t* tokens, void* workspace, cudaStream_t stream);

}  // namespace exactly::kernels::cuda
