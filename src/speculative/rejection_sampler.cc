#include "speculative/rejection_sampler.h"

#include "core/check.h"
#include "core/faulted_in.h"

namespace exactly {

void RejectionSampler::reserve(size_t max_entries) { reserve_faulted_in(residual_, max_entries); }

VerifyOutcome RejectionSampler::verify(std::span<const int32_t> drafts, std::span<const DistributionView> draft_dists,
                                       const std::function<DistributionView(size_t)>& target_at, Rng& rng) {
  return verify(drafts, draft_dists, target_at, [&rng] { return rng.uniform(); });
}

VerifyOutcome RejectionSampler::verify(std::span<const int32_t> drafts, std::span<const DistributionView> draft_dists,
                                       const std::function<DistributionView(size_t)>& target_at,
                                       const std::function<double()>& next_uniform) {
  EXACTLY_CHECK(draft_dists.size() == drafts.size(), "%zu drafts, %zu draft distributions", drafts.size(),
                draft_dists.size());
  VerifyOutcome out;
  out.tokens.reserve(drafts.size() + 1);
  for (size_t i = 0; i < drafts.size(); ++i) {
    const DistributionView p = target_at(i);
    const int32_t x = drafts[i];
    const double accept = rule_.accept_probability(p.prob(x), draft_dists[i].prob(x));
    ++out.num_draws;
    if (next_uniform() < accept) {
      out.tokens.push_back(x);
      ++out.num_accepted;
      continue;
    }
    rule_.residual(p, draft_dists[i], residual_);
    ++out.num_draws;
    out.tokens.push_back(
        draw_from(DistributionView::sparse(std::span<const WeightedToken>(residual_)), next_uniform()));
    return out;
  }
  ++out.num_draws;
  out.tokens.push_back(draw_from(target_at(drafts.size()), next_uniform()));
  return out;
}

VerifyOutcome RejectionSampler::verify(std::span<const int32_t> drafts, std::span<const DistributionView> draft_dists,
                                       std::span<const DistributionView> target_dists, Rng& rng) {
  EXACTLY_CHECK(target_dists.size() == drafts.size() + 1, "%zu drafts need %zu target distributions, got %zu",
                drafts.size(), drafts.size() + 1, target_dists.size());
  return verify(drafts, draft_dists, [&](size_t i) { return target_dists[i]; }, rng);
}

VerifyOutcome RejectionSampler::verify_deterministic_drafts(std::span<const int32_t> drafts,
                                                            std::span<const DistributionView> target_dists, Rng& rng) {
  std::vector<DistributionView> one_hot;  // [k]
  one_hot.reserve(drafts.size());
  for (int32_t x : drafts) one_hot.push_back(DistributionView::one_hot(x));
  return verify(drafts, one_hot, target_dists, rng);
}

VerifyOutcome RejectionSampler::verify_greedy(std::span<const int32_t> drafts, std::span<const int32_t> target_argmax) {
  EXACTLY_CHECK(target_argmax.size() == drafts.size() + 1, "%zu drafts need %zu target tokens, got %zu",
                drafts.size(), drafts.size() + 1, target_argmax.size());
  return verify_greedy(drafts, [&](size_t i) { return target_argmax[i]; });
}

VerifyOutcome RejectionSampler::verify_greedy(std::span<const int32_t> drafts,
                                              const std::function<int32_t(size_t)>& argmax_at) {
  VerifyOutcome out;
  out.tokens.reserve(drafts.size() + 1);
  for (size_t i = 0;; ++i) {
    const int32_t best = argmax_at(i);
    if (i == drafts.size() || drafts[i] != best) {
      out.num_accepted = static_cast<int32_t>(i);
      out.tokens.push_back(best);
      return out;
    }
    out.tokens.push_back(drafts[i]);
  }
}

}  // namespace exactly
