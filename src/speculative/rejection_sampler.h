// Verifies one request's draft tokens against the target model's distributions
// so that the emitted tokens follow the target exactly (sampled requests) or
// equal plain greedy decoding (greedy requests).
//
// The target distributions p_i are the *processed* ones — penalties,
// temperature, top-k/top-p/min-p, as Sampler::distribution computes them — and
// p_i is conditioned on the context followed by drafts x_1..x_{i-1}, which
// matters for frequency/presence/repetition penalties. The draft
// distributions q_i are what the drafter actually sampled x_i from.
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "sample/rng.h"
#include "speculative/acceptance_rule.h"
#include "speculative/distribution_view.h"

namespace exactly {

struct VerifyOutcome {
  std::vector<int32_t> tokens;  // [num_accepted + 1]: the accepted drafts, then one target-sampled token
  int32_t num_accepted = 0;     // drafts kept, 0..k
  int32_t num_draws = 0;        // uniforms taken from the request's Rng (see verify)
};

class RejectionSampler {
 public:
  // Tests pass a different rule to show what a wrong one does; the engine
  // always uses the default.
  explicit RejectionSampler(const AcceptanceRule& rule = kModifiedRejection) : rule_(rule) {}

  // Sizes the residual's scratch for distributions of up to `max_entries`
  // tokens and writes it once, so that its pages are faulted in here rather
  // than inside the first rejection of a run.
  void reserve(size_t max_entries);

  // Modified rejection sampling over k = drafts.size() positions:
  //   for i = 1..k: u ~ U[0,1); accept x_i iff u < min(1, p_i(x_i) / q_i(x_i));
  //                 on rejection draw from normalize(max(0, p_i - q_i)) and stop;
  //   all accepted: draw the bonus token from p_{k+1}.
  // RNG use is fixed by the outcome: one uniform per acceptance test run, plus
  // one for the replacement or the bonus token. So num_draws is
  // num_accepted + 2 after a rejection and k + 1 when all k drafts are
  // accepted. No draw is skipped when a probability is 0 or 1, so a seeded
  // request's stream position never depends on rounding.
  //
  // `target_at(i)` returns p_{i+1} (i in 0..k) and is called only for the
  // positions the verification reaches, so the engine can process a position's
  // logits lazily; each returned view must stay valid until verify returns.
  // Cost: O(k) lookups plus one pass over one distribution (the replacement's
  // or the bonus's).
  VerifyOutcome verify(std::span<const int32_t> drafts,              // [k]
                       std::span<const DistributionView> draft_dists,  // [k]: q_1..q_k
                       const std::function<DistributionView(size_t)>& target_at, Rng& rng);

  // The same with the uniforms from `next_uniform` (the n-th call gives the
  // request's n-th draw): what a device that verifies rows is given, the
  // request's next k + 1 draws, reproduced on the host.
  VerifyOutcome verify(std::span<const int32_t> drafts, std::span<const DistributionView> draft_dists,
                       const std::function<DistributionView(size_t)>& target_at,
                       const std::function<double()>& next_uniform);

  // The same with all k + 1 target distributions already computed.
  VerifyOutcome verify(std::span<const int32_t> drafts,               // [k]
                       std::span<const DistributionView> draft_dists,   // [k]: q_1..q_k
                       std::span<const DistributionView> target_dists,  // [k + 1]: p_1..p_{k+1}
                       Rng& rng);

  // The uniforms verify() takes for k drafts of which `accepted` are kept:
  // what a device that verifies with the request's next k + 1 draws used of
  // them.
  static int32_t draws_used(size_t k, size_t accepted) {
    return static_cast<int32_t>(accepted == k ? k + 1 : accepted + 2);
  }

  // Drafts from a deterministic drafter (n-gram lookup): every q_i is one-hot
  // at x_i, so x_i is accepted with probability p_i(x_i) and a rejection draws
  // from p_i with x_i removed. Same RNG use as verify().
  VerifyOutcome verify_deterministic_drafts(std::span<const int32_t> drafts,               // [k]
                                            std::span<const DistributionView> target_dists,  // [k + 1]
                                            Rng& rng);

  // Greedy requests (temperature 0): keep drafts while they equal the target's
  // argmax, then emit the target's argmax at the first mismatch (or after the
  // last draft). Deterministic; no RNG draws.
  static VerifyOutcome verify_greedy(std::span<const int32_t> drafts,          // [k]
                                     std::span<const int32_t> target_argmax);  // [k + 1]
  // The same with argmax_at(i) giving position i's argmax (i in 0..k), asked
  // only for the positions the comparison reaches, in order.
  static VerifyOutcome verify_greedy(std::span<const int32_t> drafts,
                                     const std::function<int32_t(size_t)>& argmax_at);

 private:
  AcceptanceRule rule_;
  std::vector<WeightedToken> residual_;  // [num_residual_entries] scratch reused across calls
};

}  // namespace exactly
