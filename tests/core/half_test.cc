#include "core/half.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

namespace exactly {
namespace {

// Every one of the 65536 half values converts to float and back unchanged.
TEST(Half, RoundTripsEveryHalfValue) {
  for (uint32_t h = 0; h < 65536; ++h) {
    float f = half_to_float(static_cast<uint16_t>(h));
    if (std::isnan(f)) continue;
    ASSERT_EQ(float_to_half(f), h) << std::hex << h;
  }
}

// float -> half agrees with the hardware conversion (round to nearest even).
TEST(Half, MatchesCompilerConversion) {
  uint32_t state = 12345;
  for (int i = 0; i < 1000000; ++i) {
    state = state * 1664525u + 1013904223u;
    float f;
    uint32_t bits = state;
    std::memcpy(&f, &bits, 4);
    if (std::isnan(f)) continue;
    _Float16 h = static_cast<_Float16>(f);
    uint16_t expected;
    std::memcpy(&expected, &h, 2);
    ASSERT_EQ(float_to_half(f), expected) << f;
  }
}

TEST(BFloat16, RoundsToNearestEven) {
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f)), 1.0f);
  // 1 + 2^-8 is halfway between two bf16 values; ties go to even (1.0).
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 1.0f / 256)), 1.0f);
  EXPECT_EQ(bf16_to_float(float_to_bf16(1.0f + 3.0f / 256)), 1.0f + 4.0f / 256);
}

}  // namespace
}  // namespace exactly
