// Errors in units of the last place, for the tests of the CPU exponentials.
#pragma once

#include <algorithm>
#include <cmath>

namespace exactly::testing {

// |got - exact| in units of the last place of the fp32 result nearest
// `exact`; results in the subnormal range share the smallest normal ulp.
inline double ulp_error(float got, double exact) {
  int e = 0;
  std::frexp(exact, &e);                                    // exact = f * 2^e, f in [0.5, 1)
  const double ulp = std::ldexp(1.0, std::max(e, -125) - 24);  // fp32 has 24 significant bits
  return std::fabs(static_cast<double>(got) - exact) / ulp;
}

}  // namespace exactly::testing
