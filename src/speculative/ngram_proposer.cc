#include "speculative/ngram_proposer.h"

#include <algorithm>

#include "core/check.h"

namespace exactly {

NgramProposer::NgramProposer(const NgramConfig& config) : config_(config) {
  EXACTLY_CHECK(config.n_min >= 1 && config.n_min <= config.n_max, "n_min %d, n_max %d", config.n_min, config.n_max);
}

std::vector<int32_t> NgramProposer::propose(std::span<const int32_t> tokens, int32_t k) const {
  EXACTLY_CHECK(k >= 0, "k %d", k);
  const size_t len = tokens.size();
  if (k == 0 || len < 2) return {};
  // A match of the suffix ending just before position `next` (so tokens[next]
  // is the first draft) needs next <= len - 1 and can be at most `next` long.
  // It may overlap the suffix itself ("a b a b a b" matches at distance 2).
  const size_t n_max = std::min(static_cast<size_t>(config_.n_max), len - 1);
  size_t best_len = 0, best_next = 0;
  for (size_t next = len - 1; next >= 1 && best_len < n_max; --next) {
    const size_t cap = std::min(n_max, next);
    size_t match = 0;
    while (match < cap && tokens[next - 1 - match] == tokens[len - 1 - match]) ++match;
    // Scanning from the most recent position back, only a strictly longer
    // match replaces the current one.
    if (match > best_len) {
      best_len = match;
      best_next = next;
    }
  }
  if (best_len < static_cast<size_t>(config_.n_min)) return {};
  const size_t end = std::min(len, best_next + static_cast<size_t>(k));
  return {tokens.begin() + static_cast<ptrdiff_t>(best_next), tokens.begin() + static_cast<ptrdiff_t>(end)};
}

}  // namespace exactly
