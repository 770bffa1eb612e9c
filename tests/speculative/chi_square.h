// Chi-square goodness of fit for the statistical tests: the statistic and the
// critical value at a chosen false-alarm rate.
#pragma once

#include <cmath>
#include <cstdint>
#include <vector>

#include "core/check.h"

namespace exactly::testing {

// Regularized lower incomplete gamma P(a, x): the power series
// x^a e^-x / Gamma(a+1) * sum_n x^n / ((a+1)...(a+n)) below x < a + 1, and
// 1 - Q(a, x) with Q from Legendre's continued fraction (evaluated by the
// modified Lentz method) above.
inline double regularized_lower_gamma(double a, double x) {
  if (x <= 0) return 0.0;
  const double log_prefactor = a * std::log(x) - x - std::lgamma(a);
  if (x < a + 1) {
    double term = 1.0 / a, sum = term;
    for (int n = 1; n < 1000 && std::abs(term) > 1e-17 * std::abs(sum); ++n) {
      term *= x / (a + n);
      sum += term;
    }
    return sum * std::exp(log_prefactor);
  }
  constexpr double kTiny = 1e-300;
  double b = x + 1 - a, c = 1 / kTiny, d = 1 / b, h = d;
  for (int i = 1; i < 1000; ++i) {
    const double an = -i * (i - a);
    b += 2;
    d = an * d + b;
    if (std::abs(d) < kTiny) d = kTiny;
    c = b + an / c;
    if (std::abs(c) < kTiny) c = kTiny;
    d = 1 / d;
    const double delta = d * c;
    h *= delta;
    if (std::abs(delta - 1) < 1e-16) break;
  }
  return 1.0 - std::exp(log_prefactor) * h;
}

inline double chi_square_cdf(double x, int dof) { return regularized_lower_gamma(dof / 2.0, x / 2.0); }

// The x with P(chi2_dof > x) = upper_tail, by bisection on the CDF.
inline double chi_square_upper_quantile(double upper_tail, int dof) {
  double lo = 0, hi = dof + 100.0 * std::sqrt(2.0 * dof) + 100;
  for (int i = 0; i < 200; ++i) {
    const double mid = 0.5 * (lo + hi);
    (1 - chi_square_cdf(mid, dof) > upper_tail ? lo : hi) = mid;
  }
  return 0.5 * (lo + hi);
}

// Wilson–Hilferty: (X/k)^(1/3) is close to normal with mean 1 - 2/(9k) and
// variance 2/(9k). `z` is the standard normal quantile of the same tail.
inline double wilson_hilferty_quantile(double z, int dof) {
  const double v = 2.0 / (9.0 * dof);
  const double c = 1 - v + z * std::sqrt(v);
  return dof * c * c * c;
}

// Pearson's statistic of `counts` against `expected_probs` (same length; cells
// with zero expected probability must have zero count, and are not counted as
// degrees of freedom). Returns the statistic; `dof` gets cells - 1.
inline double chi_square_statistic(const std::vector<int64_t>& counts, const std::vector<double>& expected_probs,
                                   int* dof) {
  EXACTLY_CHECK(counts.size() == expected_probs.size());
  int64_t total = 0;
  for (int64_t c : counts) total += c;
  double stat = 0;
  int cells = 0;
  for (size_t i = 0; i < counts.size(); ++i) {
    if (expected_probs[i] <= 0) {
      if (counts[i] > 0) return INFINITY;
      continue;
    }
    const double expected = expected_probs[i] * static_cast<double>(total);
    const double diff = static_cast<double>(counts[i]) - expected;
    stat += diff * diff / expected;
    ++cells;
  }
  *dof = cells - 1;
  return stat;
}

}  // namespace exactly::testing
