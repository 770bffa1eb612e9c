// The chi-square quantiles the distribution tests rely on, against printed
// tables (Abramowitz & Stegun, table 26.8; NIST/SEMATECH handbook 1.3.6.7.4).
#include "chi_square.h"

#include <gtest/gtest.h>

namespace exactly::testing {
namespace {

TEST(ChiSquare, QuantilesMatchPublishedTables) {
  struct Row {
    double upper_tail;
    int dof;
    double table;
  };
  const Row rows[] = {
      {0.05, 1, 3.841},   {0.01, 1, 6.635},   {0.001, 1, 10.828}, {0.05, 9, 16.919},  {0.01, 9, 21.666},
      {0.001, 9, 27.877}, {0.001, 10, 29.588}, {0.05, 100, 124.342}, {0.001, 100, 149.449},
  };
  for (const Row& r : rows)
    EXPECT_NEAR(chi_square_upper_quantile(r.upper_tail, r.dof), r.table, 2e-3) << r.upper_tail << " " << r.dof;
}

TEST(ChiSquare, OneDegreeOfFreedomIsASquaredNormal) {
  // P(chi2_1 > z^2) = P(|N| > z) = erfc(z / sqrt 2): exact at any tail.
  for (double z : {1.0, 2.0, 3.0, 3.890592}) {
    const double tail = std::erfc(z / std::sqrt(2.0));
    EXPECT_NEAR(chi_square_upper_quantile(tail, 1), z * z, 1e-6 * z * z) << z;
  }
}

TEST(ChiSquare, WilsonHilfertyAgreesInTheFarTail) {
  // z = 3.719016 is the standard normal's 1 - 1e-4 quantile.
  for (int dof : {9, 99}) {
    const double exact = chi_square_upper_quantile(1e-4, dof);
    EXPECT_NEAR(wilson_hilferty_quantile(3.719016, dof), exact, 0.02 * exact) << dof;
  }
}

}  // namespace
}  // namespace exactly::testing
