// The input of one forward pass: the flattened tokens of every scheduled
// sequence with their positions and where their KV goes, as plain arrays.
// The model never sees scheduler objects.
#pragma once

#include <algorithm>
#include <cstdint>
#include <span>
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
  // [logits_rows] or empty: 1 where the caller needs only the row's argmax
  // (a plain greedy decode), so a GPU model need not copy the row back.
  std::vector<uint8_t> argmax_only;

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int32_t num_seqs() const { return static_cast<int32_t>(seq_lens.size()); }

  // Packing, shared by every caller that builds a batch from block tables.
  // Empties the batch for n_seqs sequences of at most max_blocks blocks each.
  void reset(size_t n_seqs, size_t max_blocks) {
    tokens.clear();
    positions.clear();
    slot_mapping.clear();
    query_start.assign(1, 0);
    seq_lens.clear();
    logits_rows.clear();
    argmax_only.clear();
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

}  // namespace exactly
