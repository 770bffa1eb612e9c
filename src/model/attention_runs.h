// A step's sequences split into runs for the attention kernels: consecutive
// sequences that each bring one query token (decode rows) form one kind of
// run, the others (prompt chunks, speculative verifies) the other kind.
//
// Why: a GPU prefill kernel tiles queries in blocks of 64-128 rows, so a
// decode row riding in a prompt step costs a whole block of products per
// key tile for its one token; the split-KV decode kernel reads its keys
// once instead. The model launches one kernel per run.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace exactly {

struct AttentionRun {
  int32_t first_seq = 0;
  int32_t num_seqs = 0;
  bool single_token = false;   // every sequence of the run brings one query token
  int32_t max_query_len = 0;   // over the run's sequences
  int32_t max_seq_len = 0;
};

// query_start has num_seqs + 1 entries, seq_lens num_seqs. Runs cover every
// sequence in order. When the sequences would make more than max_runs runs
// (kinds alternating often), the result is one run of all of them, marked
// single_token only if every sequence brings one token: each launch has a
// fixed cost, and a batch that alternates so often is rare.
void split_attention_runs(std::span<const int32_t> query_start, std::span<const int32_t> seq_lens, int max_runs,
                          std::vector<AttentionRun>& runs);

}  // namespace exactly
