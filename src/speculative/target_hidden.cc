#include "speculative/target_hidden.h"

#include <algorithm>

#include "core/check.h"

namespace exactly {

void TargetHiddenStates::record(SeqId seq, int64_t first, int64_t count, const float* rows) {
  EXACTLY_CHECK(first >= 0 && count >= 0);
  Rows& r = seqs_[seq];
  const auto end = static_cast<size_t>(first + count);
  if (r.known.size() < end) {
    r.known.resize(end, false);
    r.data.resize(end * static_cast<size_t>(dim_));
  }
  std::copy(rows, rows + count * dim_, r.data.begin() + first * dim_);
  std::fill(r.known.begin() + first, r.known.begin() + static_cast<std::ptrdiff_t>(end), true);
}

const float* TargetHiddenStates::at(SeqId seq, int64_t pos) const {
  const auto it = seqs_.find(seq);
  if (it == seqs_.end() || pos < 0 || static_cast<size_t>(pos) >= it->second.known.size() ||
      !it->second.known[static_cast<size_t>(pos)])
    return nullptr;
  return it->second.data.data() + pos * dim_;
}

void TargetHiddenStates::fork(SeqId parent, SeqId child) {
  const auto it = seqs_.find(parent);
  if (it != seqs_.end()) seqs_[child] = it->second;
}

bool TargetHiddenStates::has(SeqId seq, int64_t first, int64_t last) const {
  for (int64_t p = first; p <= last; ++p)
    if (at(seq, p) == nullptr) return false;
  return true;
}

}  // namespace exactly
