#include <gtest/gtest.h>

#include <random>

#include "test_vocab.h"
#include "tokenizer/tokenizer.h"
#include "tokenizer/utf8.h"

namespace exactly {
namespace {

// A byte-level vocabulary: token id b is the single byte b.
std::unique_ptr<Tokenizer> byte_tokenizer() { return Tokenizer::create(testing::byte_level_spec({})); }

bool is_valid_utf8(const std::string& s) {
  for (size_t i = 0; i < s.size();) {
    const utf8::Scan sc = utf8::scan(s, i);
    if (sc.status != utf8::Status::kValid) return false;
    i += sc.length;
  }
  return true;
}

TEST(StreamingDetokenizer, HoldsBytesUntilTheCharacterCompletes) {
  const auto tok = byte_tokenizer();
  StreamingDetokenizer d(*tok);
  EXPECT_EQ(d.push('a'), "a");
  EXPECT_EQ(d.push(0xF0), "");
  EXPECT_EQ(d.push(0x9F), "");
  EXPECT_EQ(d.push(0x98), "");
  EXPECT_EQ(d.push(0x80), "\U0001F600");
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamingDetokenizer, InvalidBytesBecomeReplacementCharacters) {
  const auto tok = byte_tokenizer();
  StreamingDetokenizer d(*tok);
  EXPECT_EQ(d.push(0xFF), "\uFFFD");           // can never start a character
  EXPECT_EQ(d.push(0xC3), "");                 // could still complete
  EXPECT_EQ(d.push('a'), "\uFFFD" "a");        // ... but did not
  EXPECT_EQ(d.push(0xE0), "");
  EXPECT_EQ(d.push(0x80), "\uFFFD\uFFFD");     // E0 80 is an overlong start: two subparts
  EXPECT_EQ(d.push(0xE2), "");
  EXPECT_EQ(d.push(0x82), "");
  EXPECT_EQ(d.flush(), "\uFFFD");              // a truncated character at the end
  EXPECT_EQ(d.flush(), "");
}

TEST(StreamingDetokenizer, RandomSplitsOfValidTextReassembleExactly) {
  const auto tok = Tokenizer::create(
      testing::byte_level_spec({{"\xC3", "\xA9"}, {"\xE2\x82", "\xAC"}, {"\xE2", "\x82"}, {"\x98", "\x80"}}));
  const std::string text = "caf\xC3\xA9 \xE2\x82\xAC 5 \xF0\x9F\x98\x80 \xE4\xBD\xA0\xE5\xA5\xBD \xD8\xB3\xD9\x84\xD8\xA7\xD9\x85";
  const std::vector<int32_t> ids = tok->encode(text, false);
  StreamingDetokenizer d(*tok);
  std::string out;
  for (int32_t id : ids) {
    const std::string chunk = d.push(id);
    EXPECT_TRUE(is_valid_utf8(chunk)) << "a pushed chunk ended inside a character";
    out += chunk;
  }
  out += d.flush();
  EXPECT_EQ(out, text);
}

TEST(StreamingDetokenizer, RandomBytesMatchAOneShotConversion) {
  // Independent reference: a direct implementation of "maximal subpart"
  // replacement over the whole byte string.
  auto one_shot = [](const std::string& s) {
    std::string out;
    for (size_t i = 0; i < s.size();) {
      const utf8::Scan sc = utf8::scan(s, i);
      out += sc.status == utf8::Status::kValid ? s.substr(i, sc.length) : std::string(utf8::kReplacementChar);
      i += sc.length;
    }
    return out;
  };
  const auto tok = byte_tokenizer();
  std::mt19937 rng(99);
  const uint8_t interesting[] = {'a', 0x80, 0xBF, 0xC3, 0xA9, 0xE0, 0xA0, 0xED, 0xF0, 0x90, 0xF4, 0x8F, 0xFF};
  for (int trial = 0; trial < 500; ++trial) {
    std::string bytes;
    StreamingDetokenizer d(*tok);
    std::string out;
    const size_t len = rng() % 12;
    for (size_t i = 0; i < len; ++i) {
      const uint8_t b = interesting[rng() % sizeof(interesting)];
      bytes += static_cast<char>(b);
      const std::string chunk = d.push(b);
      EXPECT_TRUE(is_valid_utf8(chunk));
      out += chunk;
    }
    out += d.flush();
    EXPECT_EQ(out, one_shot(bytes));
  }
}

}  // namespace
}  // namespace exactly
