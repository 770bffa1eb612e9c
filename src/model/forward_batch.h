// The input of one forward pass: the flattened tokens of every scheduled
// sequence with their positions and where their KV goes, as plain arrays.
// The model never sees scheduler objects.
#pragma once

#include <cstdint>
#include <vector>

namespace exactly {

struct ForwardBatch {
  std::vector<int32_t> tokens;        // [n_tokens] token ids, sequences back to back
  std::vector<int32_t> positions;     // [n_tokens] position of each token in its sequence
  std::vector<int64_t> slot_mapping;  // [n_tokens] KV slot (block * block_size + offset)
  std::vector<int32_t> query_start;   // [n_seqs + 1] first token of each sequence
  std::vector<int32_t> seq_lens;      // [n_seqs] context length after this pass
  std::vector<int32_t> block_tables;  // [n_seqs, max_blocks_per_seq] physical block ids
  int32_t max_blocks_per_seq = 0;
  std::vector<int32_t> logits_rows;   // token indices whose logits are wanted, in output order

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens.size()); }
};

}  // namespace exactly
