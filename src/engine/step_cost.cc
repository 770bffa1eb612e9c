#include "engine/step_cost.h"

#include <algorithm>

#include "spec/acceptance_stats.h"

namespace exactly {

namespace {

// Weighted variance of the observed step sizes (tokens²) below which the
// slope is not identifiable.
constexpr double kMinSizeVariance = 1.0;

}  // namespace

void StepCostModel::observe(int64_t tokens, double seconds) {
  const double n = static_cast<double>(tokens), decay = 1.0 - weight_;
  w_ = decay * w_ + weight_;
  wn_ = decay * wn_ + weight_ * n;
  wt_ = decay * wt_ + weight_ * seconds;
  wnn_ = decay * wnn_ + weight_ * n * n;
  wnt_ = decay * wnt_ + weight_ * n * seconds;
  if (const auto f = current_fit()) last_fit_ = f;
}

std::optional<StepCostModel::Fit> StepCostModel::fit() const { return last_fit_; }

std::optional<StepCostModel::Fit> StepCostModel::current_fit() const {
  if (w_ <= 0) return std::nullopt;
  const double mean_n = wn_ / w_, mean_t = wt_ / w_;
  const double var_n = wnn_ / w_ - mean_n * mean_n;
  if (var_n < kMinSizeVariance) return std::nullopt;  // step sizes barely vary: the slope is not identifiable
  const double per_token = std::max(0.0, (wnt_ / w_ - mean_n * mean_t) / var_n);
  const double fixed = std::max(0.0, mean_t - per_token * mean_n);
  return Fit{fixed, per_token};
}

std::optional<double> StepCostModel::mean_seconds() const {
  if (w_ <= 0) return std::nullopt;
  return wt_ / w_;
}

double relative_verify_cost(const StepCostModel::Fit& fit, int64_t decoding, double draft_pass_seconds) {
  const double b = fit.per_token * static_cast<double>(std::max<int64_t>(1, decoding));
  const double total = fit.fixed + b;
  return total > 0 ? (b + draft_pass_seconds) / total : 1.0;
}

double relative_speculation_cost(const StepCostModel& target, std::optional<double> draft_pass_seconds,
                                 int64_t decoding, double prior_verify_cost) {
  if (const auto fit = target.fit()) return relative_verify_cost(*fit, decoding, draft_pass_seconds.value_or(0.0));
  const std::optional<double> step = target.mean_seconds();
  if (!draft_pass_seconds || *draft_pass_seconds <= 0 || !step || *step <= 0) return -1.0;
  return prior_verify_cost + *draft_pass_seconds / *step;
}

int64_t probe_draft_length(int64_t decoding) {
  // At least 3 tokens more than the plain step: with the two sizes about
  // equally weighted, a variance of (3/2)² or more, past kMinSizeVariance.
  const int64_t n = std::max<int64_t>(1, decoding);
  return (3 + n - 1) / n;
}

int32_t draft_length_for_cost(double acceptance_rate, double relative_cost, int32_t k_max) {
  int32_t best_k = 0;
  double best = 1.0;  // k = 0: one token for one unit of cost
  for (int32_t k = 1; k <= k_max; ++k) {
    const double value = expected_tokens_per_verify(acceptance_rate, k) / (1.0 + k * relative_cost);
    if (value > best) {
      best = value;
      best_k = k;
    }
  }
  return best_k;
}

}  // namespace exactly
