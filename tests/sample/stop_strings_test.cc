#include "sample/stop_strings.h"

#include <gtest/gtest.h>

namespace exactly {
namespace {

// Feeds text in pieces and returns everything emitted.
std::string stream(StopStringMatcher& m, const std::vector<std::string>& pieces) {
  std::string out;
  for (const auto& p : pieces) out += m.push(p);
  return out + m.flush();
}

TEST(StopStrings, MatchesAcrossPieceBoundariesAndExcludesTheStop) {
  StopStringMatcher m({"\nUser:"});
  EXPECT_EQ(stream(m, {"Hello", " there\nUs", "er: more"}), "Hello there");
  EXPECT_TRUE(m.stopped());
  EXPECT_EQ(m.matched(), "\nUser:");
}

TEST(StopStrings, HoldsBackOnlyWhatCouldStartAStop) {
  StopStringMatcher m({"END"});
  EXPECT_EQ(m.push("abc E"), "abc ");
  EXPECT_EQ(m.push("x"), "Ex");
  EXPECT_EQ(m.flush(), "");
  EXPECT_FALSE(m.stopped());
}

TEST(StopStrings, EarliestOfSeveralStopsWins) {
  StopStringMatcher m({"bb", "a b"});
  EXPECT_EQ(stream(m, {"xa", " bb"}), "x");
  EXPECT_EQ(m.matched(), "a b");
}

// Any split of a text into pieces emits the same result as the whole text.
TEST(StopStrings, ResultIsIndependentOfHowTextIsSplit) {
  const std::string text = "one two <stop> three";
  for (size_t a = 0; a <= text.size(); ++a) {
    for (size_t b = a; b <= text.size(); ++b) {
      StopStringMatcher m({"<stop>", "zz"});
      std::string got = stream(m, {text.substr(0, a), text.substr(a, b - a), text.substr(b)});
      ASSERT_EQ(got, "one two ") << a << "," << b;
    }
  }
}

TEST(StopStrings, NoStopsPassesEverythingThrough) {
  StopStringMatcher m({});
  EXPECT_EQ(m.push("abc"), "abc");
  EXPECT_EQ(m.flush(), "");
}

}  // namespace
}  // namespace exactly
