// One forward pass as plain arrays: the model's input (the flattened tokens of
// every scheduled sequence with their positions and where their KV goes) and
// the jobs on its logits rows (sampling, processing, verifies). The model
// never sees scheduler objects.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <span>
#include <vector>

namespace exactly {

// What the caller does with a logits row.
enum class RowUse : uint8_t {
  kLogits = 0,  // needs the whole row (host sampling, logprobs, speculation)
  kArgmax = 1,  // needs only its argmax (a plain greedy decode)
  kSample = 2,  // the model samples it (a model that samples on its device)
  kVerify = 3,  // a position of a sampled speculative verify the model runs (RowVerify)
};

// One row sampled by the model itself, by the host Sampler's rule
// (sample/sampler.h): penalties, temperature, top-k, top-p, min-p, then an
// inverse-CDF draw with `uniform`, the request's own draw for this token.
// The layout is the GPU kernel's (kernels/cuda/sampling.h).
struct RowSampling {
  float temperature = 0.0f;  // <= 0: greedy
  int32_t top_k = 0;         // <= 0: off
  float top_p = 1.0f;        // >= 1: off
  float min_p = 0.0f;        // <= 0: off
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  int32_t penalty_begin = 0;  // this row's entries of penalty_tokens: [begin, end)
  int32_t penalty_end = 0;
  double uniform = 0.0;
};

// One distinct token of a sampled row's context, for its penalties.
struct PenaltyToken {
  int32_t id;
  int32_t output_count;  // occurrences in the generated part
  int32_t in_window;     // 1 when inside the repetition penalty's window
};

// A sampled speculative verify the model runs itself: modified rejection
// sampling (speculative/rejection_sampler.h) of num_drafts drafts against the
// k + 1 logits rows from first_row on (each with its RowSampling, whose
// uniform is unused). The layout is the GPU kernel's (kernels/cuda/sampling.h).
struct RowVerify {
  int32_t first_row;
  int32_t num_drafts;     // k >= 1
  int32_t draft_begin;    // verify_drafts[draft_begin, + k): x_1..x_k
  int32_t q_begin;        // q_offsets[q_begin, + k + 1): q_i = q_entries[q_offsets[q_begin + i], q_offsets[q_begin + i + 1])
  int32_t uniform_begin;  // verify_uniforms[uniform_begin, + k + 1): the request's next k + 1 draws
  int32_t pad = 0;
};

// One entry of a draft distribution q_i: what the drafter sampled x_i from
// (a deterministic drafter's q_i is the single entry (x_i, 1)).
struct DraftProb {
  int32_t id;
  int32_t pad;
  double p;
};

// A row marked kSample that is changed before it is sampled, as the host's
// process_row changes it: its logit_bias entries added, then every token its
// grammar's mask leaves out set to -inf. Only for a model that processes rows
// itself (Model::processes_rows()).
struct RowProcessing {
  int32_t row;         // logits row
  int32_t bias_begin;  // RowJobs::logit_biases[bias_begin, bias_end)
  int32_t bias_end;
  // [ceil(vocab / 32)], bit t of word t / 32 set when token t is allowed, or
  // null (no grammar). Filled while the pass runs: read only after
  // RowJobs::await_masks() returns.
  const uint32_t* mask;
};

struct LogitBiasEntry {
  int32_t id;  // distinct within a row
  float bias;  // added to the logit
};

// What the model computes: the tokens of every scheduled sequence, where they
// sit and where their KV goes, and which rows' logits and hidden states come
// back. Everything a forward pass reads.
struct ModelInput {
  std::vector<int32_t> tokens;        // [n_tokens] token ids, sequences back to back
  std::vector<int32_t> positions;     // [n_tokens] position of each token in its sequence
  std::vector<int64_t> slot_mapping;  // [n_tokens] KV slot (block * block_size + offset)
  std::vector<int32_t> query_start;   // [n_seqs + 1] first token of each sequence
  std::vector<int32_t> seq_lens;      // [n_seqs] context length after this pass
  std::vector<int32_t> block_tables;  // [n_seqs, max_blocks_per_seq] physical block ids
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logits_rows;   // token indices whose logits are wanted, in output order
  // Token indices whose hidden state is wanted (Model::hidden()), in output
  // order; empty for a model that does not return hidden states.
  std::vector<int32_t> hidden_rows;
  // [n_tokens, dim] or empty: a draft head's second input, the hidden state
  // each token is read with (model/draft_head.h).
  std::vector<float> hidden_in;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens.size()); }

  // Packing, shared by every caller that builds a batch from block tables.
  // Empties the input for n_seqs sequences of at most max_blocks blocks each.
  void reset(size_t n_seqs, size_t max_blocks) {
    tokens.clear();
    positions.clear();
    slot_mapping.clear();
    query_start.assign(1, 0);
    seq_lens.clear();
    logits_rows.clear();
    hidden_rows.clear();
    hidden_in.clear();
    max_blocks_per_seq = static_cast<int32_t>(max_blocks);
    block_tables.assign(n_seqs * max_blocks, 0);
  }
  // Starts sequence i (in order) with its block table.
  void begin_sequence(size_t i, std::span<const int32_t> table) {
    std::copy(table.begin(), table.end(), block_tables.begin() + static_cast<std::ptrdiff_t>(i * max_blocks_per_seq));
  }
  // Appends a token at `pos` of the current sequence, its KV slot read from `table`.
  void push_token(int32_t token, int64_t pos, std::span<const int32_t> table, int32_t block_size) {
    tokens.push_back(token);
    positions.push_back(static_cast<int32_t>(pos));
    slot_mapping.push_back(int64_t{table[static_cast<size_t>(pos / block_size)]} * block_size + pos % block_size);
  }
  // Ends the current sequence; its context length after this pass is seq_len.
  void end_sequence(int64_t seq_len) {
    query_start.push_back(static_cast<int32_t>(tokens.size()));
    seq_lens.push_back(static_cast<int32_t>(seq_len));
  }
};

// What is done with the logits rows once computed: each row's use, and for a
// model that samples, processes and verifies rows itself (Model::samples_rows(),
// processes_rows(), verified_draft_entries()) the parameters of that work.
// Every per-row array is indexed like ModelInput::logits_rows.
struct RowJobs {
  // [logits_rows] or empty (every row kLogits): a GPU model copies back only
  // the rows that are needed whole.
  std::vector<RowUse> row_use;
  // [logits_rows] or empty; read for kSample rows only.
  std::vector<RowSampling> row_sampling;
  std::vector<PenaltyToken> penalty_tokens;
  // kSample rows processed before sampling, in row order, and their biases.
  std::vector<RowProcessing> row_processing;
  std::vector<LogitBiasEntry> logit_biases;
  // Returns once every row_processing mask is filled (they are filled beside
  // the pass); null when no row has one.
  std::function<void()> await_masks;
  // Sampled verifies run by the model (their rows marked kVerify). Their
  // tokens come back as the emitted ones (accepted drafts, then the
  // replacement or bonus token) followed by -1 up to the job's last row.
  std::vector<RowVerify> verifies;
  std::vector<int32_t> verify_drafts, q_offsets;
  std::vector<DraftProb> q_entries;
  std::vector<double> verify_uniforms;
  // The probability at temperature 1 of each kArgmax row's token is wanted
  // too (Model::argmax_probabilities): a greedy draft's confidence.
  bool argmax_probabilities = false;

  void clear() {
    row_use.clear();
    row_sampling.clear();
    penalty_tokens.clear();
    row_processing.clear();
    logit_biases.clear();
    await_masks = nullptr;
    verifies.clear();
    verify_drafts.clear();
    q_offsets.clear();
    argmax_probabilities = false;
    q_entries.clear();
    verify_uniforms.clear();
  }
};

// One forward pass: the model's input and the jobs on its logits rows.
struct ForwardBatch {
  ModelInput input;
  RowJobs jobs;

  // Empties both for n_seqs sequences of at most max_blocks blocks each.
  void reset(size_t n_seqs, size_t max_blocks) {
    input.reset(n_seqs, max_blocks);
    jobs.clear();
  }
};

}  // namespace exactly
