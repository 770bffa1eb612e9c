#include "speculative/acceptance_stats.h"

#include <algorithm>
#include <cmath>

#include "core/check.h"

namespace exactly {

double expected_tokens_per_verify(double a, int32_t k) {
  EXACTLY_CHECK(k >= 0 && a >= 0 && a <= 1, "k %d, rate %g", k, a);
  // Summed rather than the closed form, which is 0/0 at a = 1.
  double total = 0, term = 1;
  for (int32_t j = 0; j <= k; ++j) {
    total += term;
    term *= a;
  }
  return total;
}

AcceptanceStats::AcceptanceStats(const AcceptanceStatsConfig& config) : config_(config) {
  EXACTLY_CHECK(config.ema_weight > 0 && config.ema_weight <= 1, "ema_weight %g", config.ema_weight);
  EXACTLY_CHECK(config.prior_rate >= 0 && config.prior_rate <= 1, "prior_rate %g", config.prior_rate);
}

void AcceptanceStats::record(int32_t num_drafted, int32_t num_accepted) {
  EXACTLY_CHECK(num_drafted >= 0 && num_accepted >= 0 && num_accepted <= num_drafted, "drafted %d, accepted %d",
                num_drafted, num_accepted);
  if (num_drafted == 0) return;  // nothing was tested
  ++verifies_;
  drafted_ += num_drafted;
  accepted_ += num_accepted;
  const double examined = num_accepted + (num_accepted < num_drafted ? 1 : 0);
  examined_ += static_cast<int64_t>(examined);
  pooled_accepted_ += num_accepted;
  pooled_examined_ += examined;
  if (verifies_ == 1) {
    ema_accepted_ = num_accepted;
    ema_examined_ = examined;
  } else {
    const double w = config_.ema_weight;
    ema_accepted_ = (1 - w) * ema_accepted_ + w * num_accepted;
    ema_examined_ = (1 - w) * ema_examined_ + w * examined;
  }
}

double AcceptanceStats::acceptance_rate() const {
  return drafted_ > 0 ? static_cast<double>(accepted_) / static_cast<double>(drafted_) : 0.0;
}

double AcceptanceStats::mean_accepted_length() const {
  return verifies_ > 0 ? static_cast<double>(accepted_) / static_cast<double>(verifies_) : 0.0;
}

double AcceptanceStats::recent_acceptance_rate() const {
  return verifies_ > 0 ? ema_accepted_ / ema_examined_ : config_.prior_rate;
}

double AcceptanceStats::shrunk_acceptance_rate(double prior, double weight) const {
  EXACTLY_CHECK(prior >= 0 && prior <= 1 && weight >= 0, "prior %g, weight %g", prior, weight);
  if (verifies_ == 0) return prior;
  return (ema_accepted_ + weight * prior) / (ema_examined_ + weight);
}

double AcceptanceStats::lifetime_acceptance_rate() const {
  return examined_ > 0 ? static_cast<double>(accepted_) / static_cast<double>(examined_) : config_.prior_rate;
}

double AcceptanceStats::pooled_acceptance_rate(double weight) const {
  EXACTLY_CHECK(weight > 0, "weight %g", weight);
  return (pooled_accepted_ + weight * config_.prior_rate) / (pooled_examined_ + weight);
}

double AcceptanceStats::pooled_rate_to_decide_by(double weight) const {
  const double rate = pooled_acceptance_rate(weight);
  const double error = std::sqrt(rate * (1 - rate) / (pooled_examined_ + weight));
  return std::max(rate, std::min(config_.prior_rate, rate + error));
}

void AcceptanceStats::fade_pooled(double factor) {
  EXACTLY_CHECK(factor >= 0 && factor <= 1, "factor %g", factor);
  pooled_accepted_ *= 1 - factor;
  pooled_examined_ *= 1 - factor;
}

void AcceptanceStats::fade() {
  if (ema_examined_ < 1e-6) return;  // the prior has long since taken over; don't underflow to 0/0
  ema_accepted_ *= 1 - config_.ema_weight;
  ema_examined_ *= 1 - config_.ema_weight;
}

}  // namespace exactly
