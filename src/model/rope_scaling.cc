#include "model/rope_scaling.h"

#include <algorithm>
#include <cmath>

#include "core/error.h"
#include "core/format.h"

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

std::vector<float> llama3_frequency_divisors(const ModelConfig& c) {
  const Llama3Scaling& l = c.rope_llama3;
  const int pairs = c.rope_dims / 2;
  const double low_wavelength = l.original_context / static_cast<double>(l.low_freq_factor);
  const double high_wavelength = l.original_context / static_cast<double>(l.high_freq_factor);
  std::vector<float> divisors(static_cast<size_t>(pairs));
  for (int i = 0; i < pairs; ++i) {
    const double freq = std::pow(static_cast<double>(c.rope_freq_base), -2.0 * i / c.rope_dims);
    const double wavelength = 2 * M_PI / freq;
    double divisor = 1.0;
    if (wavelength > low_wavelength) {
      divisor = l.factor;
    } else if (wavelength >= high_wavelength) {
      const double smooth = (l.original_context / wavelength - l.low_freq_factor) /
                            (static_cast<double>(l.high_freq_factor) - l.low_freq_factor);
      divisor = 1.0 / ((1.0 - smooth) / l.factor + smooth);
    }
    divisors[static_cast<size_t>(i)] = static_cast<float>(divisor);
  }
  return divisors;
}

std::vector<float> global_rope_divisors(const ModelConfig& c, const float* file_factors) {
  const int pairs = c.rope_dims / 2;
  if (c.rope_yarn.factor > 0) {
    if (file_factors != nullptr || c.rope_local_freq_base > 0 || c.rope_llama3.factor > 0)
      throw FileFormatError(strformat("%s: YaRN RoPE scaling together with %s is not supported", c.name.c_str(),
                                      file_factors != nullptr       ? "rope_freqs.weight"
                                      : c.rope_llama3.factor > 0 ? "llama3 scaling"
                                                                    : "local RoPE bases"));
    return yarn_frequency_divisors(c);
  }
  std::vector<float> divisors;
  if (c.rope_llama3.factor > 0) {
    if (file_factors != nullptr)
      throw FileFormatError(strformat("%s: llama3 RoPE scaling together with rope_freqs.weight", c.name.c_str()));
    divisors = llama3_frequency_divisors(c);
  } else if (file_factors != nullptr) {
    divisors.assign(file_factors, file_factors + pairs);
  }
  if (c.rope_linear_scale != 1.0f) {
    if (divisors.empty()) divisors.assign(static_cast<size_t>(pairs), 1.0f);
    for (float& d : divisors) d *= c.rope_linear_scale;
  }
  return divisors;
}

float global_rope_magnitude(const ModelConfig& c) {
  return c.rope_yarn.factor > 0 ? c.rope_yarn.attention_factor : 1.0f;
}

}  // namespace exactly
