// NFC on cases whose answers are fixed by the Unicode standard's own
// examples (UAX #15, Unicode chapter 3.11-3.12); tests/e2e/test_hf_tokenizer.py
// compares every decomposable character and random mark sequences with
// Python's unicodedata and the tokenizers package.
#include "tokenizer/unicode_nfc.h"

#include <gtest/gtest.h>

namespace exactly::unicode {
namespace {

TEST(Nfc, ComposesAndLeavesComposedTextAlone) {
  EXPECT_EQ(nfc("e\xCC\x81"), "\xC3\xA9");          // e + U+0301 -> U+00E9
  EXPECT_EQ(nfc("\xC3\xA9"), "\xC3\xA9");           // already composed
  EXPECT_EQ(nfc("plain ascii"), "plain ascii");
  EXPECT_EQ(nfc("A\xCC\x8A"), "\xC3\x85");          // A + ring above -> U+00C5
  EXPECT_EQ(nfc("\xE2\x84\xAB"), "\xC3\x85");       // U+212B ANGSTROM SIGN: a singleton, -> U+00C5
}

TEST(Nfc, OrdersMarksByCombiningClassBeforeComposing) {
  // q + dot below (220) + dot above (230) and the other order: both end with
  // the marks in class order (nothing composes with q).
  EXPECT_EQ(nfc("q\xCC\x87\xCC\xA3"), "q\xCC\xA3\xCC\x87");
  EXPECT_EQ(nfc("q\xCC\xA3\xCC\x87"), "q\xCC\xA3\xCC\x87");
  // s + dot above + dot below -> U+1E69 (s with dot below and dot above).
  EXPECT_EQ(nfc("s\xCC\x87\xCC\xA3"), "\xE1\xB9\xA9");
  // d + dot above + dot below: dot below composes first (U+1E0D), the dot
  // above stays.
  EXPECT_EQ(nfc("d\xCC\x87\xCC\xA3"), "\xE1\xB8\x8D\xCC\x87");
}

TEST(Nfc, BlockedMarksDoNotCompose) {
  // a + dot below + ring above: the dot below composes first (U+1EA1); the
  // ring is then next to a starter it has no composite with.
  EXPECT_EQ(nfc("a\xCC\xA3\xCC\x8A"), "\xE1\xBA\xA1\xCC\x8A");
  // Two acutes: the first composes with e, and U+00E9 has no composite with
  // the second.
  EXPECT_EQ(nfc("e\xCC\x81\xCC\x81"), "\xC3\xA9\xCC\x81");
}

TEST(Nfc, CompositionExclusionsStayDecomposed) {
  EXPECT_EQ(nfc("\xE0\xA5\x98"), "\xE0\xA4\x95\xE0\xA4\xBC");  // U+0958 -> U+0915 U+093C, never recomposed
  EXPECT_EQ(nfc("\xCD\x84"), "\xCC\x88\xCC\x81");              // U+0344: a non-starter decomposition
}

TEST(Nfc, HangulByArithmetic) {
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1"), "\xEA\xB0\x80");              // L + V -> U+AC00
  EXPECT_EQ(nfc("\xE1\x84\x80\xE1\x85\xA1\xE1\x86\xA8"), "\xEA\xB0\x81");  // L + V + T -> U+AC01
  EXPECT_EQ(nfc("\xEA\xB0\x80\xE1\x86\xA8"), "\xEA\xB0\x81");              // LV + T -> LVT
  EXPECT_EQ(nfc("\xEA\xB0\x81"), "\xEA\xB0\x81");
}

TEST(Nfc, InvalidBytesPassThroughAndBreakTheRun) {
  EXPECT_EQ(nfc("e\xFF\xCC\x81"), "e\xFF\xCC\x81");  // nothing composes across the bad byte
  EXPECT_EQ(nfc(std::string("a\0b", 3)), std::string("a\0b", 3));
  EXPECT_EQ(nfc("\xCC"), "\xCC");  // a truncated sequence
}

TEST(Nfc, QuickCheckSkipsOnlyTextBelowU0300) {
  EXPECT_FALSE(maybe_not_nfc("caf\xC3\xA9 ascii \xC3\xBF"));  // U+00E9, U+00FF
  EXPECT_TRUE(maybe_not_nfc("e\xCC\x81"));
  EXPECT_TRUE(maybe_not_nfc("\xEA\xB0\x80"));
}

}  // namespace
}  // namespace exactly::unicode
