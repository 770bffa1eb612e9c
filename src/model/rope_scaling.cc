#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>

namespace exactly {

double yarn_default_attention_factor(double factor) { return factor > 1 ? 0.1 * std::log(factor) + 1.0 : 1.0; }

std::vector<float> yarn_frequency_divisors(const ModelConfig& c) {
  const YarnScaling& y = c.rope_yarn;
  const int pairs = c.rope_dims / 2;
  const double d = c.rope_dims, base = c.rope_freq_base, s = y.factor;
  // The pair index whose wavelength 2 pi / freq fits `turns` times into the
  // original context.
  auto pair_of = [&](double turns) {
    return d * std::log(y.original_context / (turns * 2 * M_PI)) / (2 * std::log(base));
  };
  double low = pair_of(y.beta_fast), high = pair_of(y.beta_slow);
  if (y.truncate) low = std::floor(low), high = std::ceil(high);
  low = std::max(low, 0.0), high = std::min(high, d - 1);
  if (low == high) high += 0.001;
  std::vector<float> divisors(static_cast<size_t>(pairs));
  for (int i = 0; i < pairs; ++i) {
    const double ramp = std::clamp((i - low) / (high - low), 0.0, 1.0);
    const double extrapolated = 1.0 - ramp;  // the share of the original frequency
    divisors[static_cast<size_t>(i)] = static_cast<float>(1.0 / (extrapolated + (1.0 - extrapolated) / s));
  }
  return divisors;
}

}  // namespace exactly
