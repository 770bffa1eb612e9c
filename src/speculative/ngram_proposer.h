// Prompt-lookup drafting: when the last few tokens of a request already
// occurred earlier in its prompt or output, guess that what followed them then
// follows them again. Cheap (no model), and strong on inputs that repeat —
// code edits, quoting, summaries, structured output.
//
// The drafts are a deterministic function of the context, so the draft
// distribution is one-hot at each draft; verify them with
// RejectionSampler::verify_deterministic_drafts (or verify_greedy).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

namespace exactly {

struct NgramConfig {
  int32_t n_max = 4;  // longest suffix matched
  int32_t n_min = 1;  // shortest suffix accepted as a match; raise it to draft less often but more surely
};

class NgramProposer {
 public:
  explicit NgramProposer(const NgramConfig& config = {});

  // Up to k tokens for `tokens` (prompt + output so far; [num_tokens]). Among
  // earlier occurrences of the context's last n tokens, for n from n_max down
  // to n_min, the longest n wins and, for that n, the most recent occurrence;
  // the drafts are the tokens that followed it, cut at k and at the end of the
  // context. The suffix itself is not an "earlier occurrence". Empty when
  // nothing matches.
  //
  // One backward scan: for each candidate position, extend the match backwards
  // up to n_max tokens, and stop at the first full-length match. O(num_tokens
  // * n_max) at worst, typically about num_tokens comparisons.
  std::vector<int32_t> propose(std::span<const int32_t> tokens, int32_t k) const;

  const NgramConfig& config() const { return config_; }

 private:
  NgramConfig config_;
};

}  // namespace exactly
