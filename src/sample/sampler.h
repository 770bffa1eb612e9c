// Turns one row of logits into a token: penalties, temperature, top-k, top-p,
// min-p (in that order), then a draw from the remaining distribution with the
// request's own generator, so a seeded request never depends on others.
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "sample/rng.h"
#include "sample/sampling_params.h"

namespace exactly {

// A distinct token of the context that a penalty applies to.
struct PenalisedToken {
  int32_t id;
  int32_t output_count;  // occurrences in the generated part (frequency and presence penalties)
  bool in_window;        // inside the repetition penalty's window
};

struct TokenProb {
  int32_t id;
  float logit;  // processed logit (after penalties and temperature)
  double p;     // probability after all filters
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `context` is the sequence so far, of which the first `num_prompt` tokens
  // are the prompt: the repetition penalty looks at all of it, frequency and
  // presence penalties at the generated part only.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> context, size_t num_prompt = 0);

  // The distribution sample() would draw from (exposed for tests): sorted by
  // decreasing logit when top-k or top-p needs an order, else in id order.
  std::vector<TokenProb> distribution(std::span<const float> logits, std::span<const int32_t> context,
                                      size_t num_prompt = 0) const;
  // The same from the penalised tokens of the context (penalised_tokens()).
  std::vector<TokenProb> distribution_with(std::span<const float> logits,
                                           std::span<const PenalisedToken> penalised) const;
  // distribution() written into `out`, whose capacity is reused: a caller that
  // keeps `out` between tokens allocates (and faults in) no new memory, where
  // a vocabulary-sized list is 786 KB.
  void distribution_into(std::span<const float> logits, std::span<const int32_t> context, size_t num_prompt,
                         std::vector<TokenProb>& out) const;
  // The inverse-CDF draw sample() makes from a distribution with uniform u:
  // the first candidate whose cumulative mass exceeds u, else the last.
  static int32_t draw(std::span<const TokenProb> dist, double u);

  // Greedy with no penalty active for this context: sample() is the argmax of
  // the raw logits, draws nothing and needs nothing else of the row.
  bool plain_greedy(size_t context_size, size_t num_prompt) const;

  // The tokens the active penalties touch, in order of first appearance:
  // what a device that samples the row needs of the context.
  std::vector<PenalisedToken> penalised_tokens(std::span<const int32_t> context, size_t num_prompt) const;

  // sample() draws exactly one uniform from rng() per token unless greedy,
  // however many candidates survive: a device that samples the row with
  // that draw keeps the request's stream where the host would have left it.

  const SamplingParams& params() const { return params_; }
  // The request's generator, shared with speculative verification so that a
  // seeded request draws from one stream.
  Rng& rng() { return rng_; }

 private:
  void fill_distribution(std::span<const float> logits, std::span<const PenalisedToken> penalised,
                         std::vector<TokenProb>& cand) const;

  SamplingParams params_;
  Rng rng_;
};

// Index of the largest value; the lowest index wins ties.
int32_t argmax(std::span<const float> values);

// Log-probabilities under the model's raw distribution (log_softmax of the
// unprocessed logits, in double): of `chosen` with its rank (1 + the number
// of tokens with a larger logit), and of the `top_n` most likely tokens (ties
// by lower id). A function of the logits alone: the same row gives the same
// bits whether it sampled a token or scored a prompt.
struct TokenLogprobs {
  int32_t id;
  double logprob;
  std::vector<std::pair<int32_t, double>> top;
  int32_t rank = 1;
};
TokenLogprobs compute_logprobs(std::span<const float> logits, int32_t chosen, int top_n);

}  // namespace exactly
