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

struct TokenProb {
  int32_t id;
  float logit;  // processed logit (after penalties and temperature)
  double p;     // probability after all filters
};

class Sampler {
 public:
  explicit Sampler(const SamplingParams& params);

  // `history` is the context so far (prompt + generated), used by penalties.
  int32_t sample(std::span<const float> logits, std::span<const int32_t> history);

  // The distribution sample() would draw from, sorted by decreasing probability
  // (exposed for tests and logprobs).
  std::vector<TokenProb> distribution(std::span<const float> logits, std::span<const int32_t> history) const;

  const SamplingParams& params() const { return params_; }

 private:
  SamplingParams params_;
  Rng rng_;
};

// Index of the largest value; the lowest index wins ties.
int32_t argmax(std::span<const float> values);

}  // namespace exactly
