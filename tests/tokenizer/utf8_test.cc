#include "tokenizer/utf8.h"

#include <gtest/gtest.h>

#include "tokenizer/byte_unicode.h"

namespace exactly {
namespace {

using utf8::Status;

TEST(Utf8, ScansWellFormedSequencesOfEachLength) {
  const std::string s = "a\xC3\xA9\xE2\x82\xAC\xF0\x9F\x98\x80";  // a é € 😀
  EXPECT_EQ(utf8::scan(s, 0).length, 1u);
  EXPECT_EQ(utf8::scan(s, 1).length, 2u);
  EXPECT_EQ(utf8::scan(s, 3).length, 3u);
  EXPECT_EQ(utf8::scan(s, 6).length, 4u);
  EXPECT_EQ(utf8::decode(s, 1, 2), U'\u00E9');
  EXPECT_EQ(utf8::decode(s, 3, 3), U'\u20AC');
  EXPECT_EQ(utf8::decode(s, 6, 4), U'\U0001F600');
}

TEST(Utf8, ReportsTruncatedAndMaximalInvalidSubparts) {
  EXPECT_EQ(utf8::scan("\xE2\x82", 0).status, Status::kTruncated);
  EXPECT_EQ(utf8::scan("\xE2\x82", 0).length, 2u);
  // Overlong, surrogate and out-of-range leads fail at the first continuation byte.
  EXPECT_EQ(utf8::scan("\xE0\x80\x80", 0).status, Status::kInvalid);
  EXPECT_EQ(utf8::scan("\xE0\x80\x80", 0).length, 1u);
  EXPECT_EQ(utf8::scan("\xED\xA0\x80", 0).status, Status::kInvalid);
  EXPECT_EQ(utf8::scan("\xF4\x90\x80\x80", 0).status, Status::kInvalid);
  EXPECT_EQ(utf8::scan("\xC0\xAF", 0).status, Status::kInvalid);
  EXPECT_EQ(utf8::scan("\xFF", 0).status, Status::kInvalid);
  // A good prefix followed by a non-continuation byte: the prefix is the subpart.
  EXPECT_EQ(utf8::scan("\xF0\x9F\x98" "a", 0).status, Status::kInvalid);
  EXPECT_EQ(utf8::scan("\xF0\x9F\x98" "a", 0).length, 3u);
}

TEST(Utf8, AppendRoundTripsThroughDecode) {
  for (char32_t cp : {U'\0', U'\x7F', U'\x80', U'\u07FF', U'\u0800', U'\uFFFF', U'\U00010000', U'\U0010FFFF'}) {
    std::string s;
    utf8::append(s, cp);
    const utf8::Scan sc = utf8::scan(s, 0);
    ASSERT_EQ(sc.status, Status::kValid);
    EXPECT_EQ(sc.length, s.size());
    EXPECT_EQ(utf8::decode(s, 0, sc.length), cp);
  }
}

TEST(ByteUnicode, MatchesTheGpt2Table) {
  // Spot values of the published table: space -> U+0120 'Ġ', newline -> U+010A 'Ċ',
  // visible ASCII and Latin-1 map to themselves, 0xAD -> U+0143.
  EXPECT_EQ(byte_unicode::char_for_byte(' '), "\xC4\xA0");
  EXPECT_EQ(byte_unicode::char_for_byte('\n'), "\xC4\x8A");
  EXPECT_EQ(byte_unicode::char_for_byte('A'), "A");
  EXPECT_EQ(byte_unicode::char_for_byte(0xE9), "\xC3\xA9");
  EXPECT_EQ(byte_unicode::char_for_byte(0xAD), "\xC5\x83");
  EXPECT_EQ(byte_unicode::char_for_byte(0x00), "\xC4\x80");
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  EXPECT_EQ(byte_unicode::to_bytes(byte_unicode::from_bytes(all)), all);
  EXPECT_FALSE(byte_unicode::to_bytes("\xE4\xBD\xA0").has_value());  // 你 is outside the mapping
}

}  // namespace
}  // namespace exactly
