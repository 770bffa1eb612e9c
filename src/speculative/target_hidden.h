// The target's hidden states of each request's positions, kept for a draft
// head (model/draft_head.h), which reads h_{s-1} beside token s. Every
// target pass hands over the hidden state of each token it computed; a
// position's value is the one of the latest pass over it, so a position
// computed again (after rejected drafts, after preemption) is overwritten,
// and the positions a request's tokens have reached hold the value of their
// accepted token. They are kept for the request's life (dim floats per
// position): a head sequence released for room catches up from them.
#pragma once

#include <cstdint>
#include <unordered_map>
#include <vector>

#include "kvcache/kv_cache_manager.h"

namespace exactly {

class TargetHiddenStates {
 public:
  explicit TargetHiddenStates(int32_t dim) : dim_(dim) {}

  int32_t dim() const { return dim_; }
  // rows ([count, dim]): the hidden states of positions [first, first + count) of `seq`.
  void record(SeqId seq, int64_t first, int64_t count, const float* rows);
  // h_pos of `seq`, or null when no pass has computed that position (one a
  // prefix-cache hit let the target skip).
  const float* at(SeqId seq, int64_t pos) const;
  // Whether every position in [first, last] is known (an empty range is).
  bool has(SeqId seq, int64_t first, int64_t last) const;
  void release(SeqId seq) { seqs_.erase(seq); }
  // `child` starts with a copy of what `parent` holds.
  void fork(SeqId parent, SeqId child);
  size_t num_sequences() const { return seqs_.size(); }

 private:
  struct Rows {
    std::vector<float> data;  // [positions, dim]
    std::vector<bool> known;  // [positions]
  };
  int32_t dim_;
  std::unordered_map<SeqId, Rows> seqs_;
};

}  // namespace exactly
