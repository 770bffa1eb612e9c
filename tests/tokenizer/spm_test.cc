// Expected ids are worked out by hand: merge the adjacent pair whose
// concatenation has the highest score (leftmost on ties) until none is in the
// vocabulary, then fall back to <0xNN> byte tokens.
#include "tokenizer/spm_tokenizer.h"

#include <gtest/gtest.h>

#include "core/error.h"
#include "core/format.h"
#include "test_vocab.h"

namespace exactly {
namespace {

using Strings = std::vector<std::string>;

TokenizerSpec tiny_spm_spec() {
  TokenizerSpec spec;
  spec.model = "llama";
  auto add = [&](std::string text, float score, TokenType type) {
    spec.tokens.push_back(std::move(text));
    spec.scores.push_back(score);
    spec.types.push_back(type);
  };
  add("<unk>", 0, TokenType::kUnknown);
  add("<s>", 0, TokenType::kControl);
  add("</s>", 0, TokenType::kControl);
  for (int b = 0; b < 256; ++b) add(strformat("<0x%02X>", b), 0, TokenType::kByte);
  const std::pair<const char*, float> pieces[] = {
      {"\u2581", -1}, {"h", -1}, {"e", -1}, {"l", -1}, {"o", -1}, {"ll", -2},
      {"he", -3}, {"\u2581he", -4}, {"llo", -5}, {"\u2581hello", -6}, {"\u2581hell", -7},
  };
  for (const auto& [text, score] : pieces) add(text, score, TokenType::kNormal);
  spec.bos = 1;
  spec.eos = 2;
  spec.unk = 0;
  return spec;
}

Strings texts(const Tokenizer& tok, const std::vector<int32_t>& ids) {
  Strings out;
  for (int32_t id : ids) out.push_back(tok.token_text(id));
  return out;
}

TEST(Spm, MergesByHighestScore) {
  const auto tok = Tokenizer::create(tiny_spm_spec());
  EXPECT_EQ(texts(*tok, tok->encode("hello", false)), (Strings{"\u2581hello"}));
  EXPECT_EQ(texts(*tok, tok->encode("hell", false)), (Strings{"\u2581hell"}));
  EXPECT_EQ(texts(*tok, tok->encode("lll", false)), (Strings{"\u2581", "ll", "l"}));  // leftmost on ties
  EXPECT_TRUE(tok->add_bos());  // the SentencePiece default
}

TEST(Spm, UnknownCharactersFallBackToBytes) {
  const auto tok = Tokenizer::create(tiny_spm_spec());
  EXPECT_EQ(texts(*tok, tok->encode("hex", false)), (Strings{"\u2581he", "<0x78>"}));
  EXPECT_EQ(texts(*tok, tok->encode("\xC3\xA9", false)), (Strings{"\u2581", "<0xC3>", "<0xA9>"}));
  EXPECT_EQ(texts(*tok, tok->encode("a b", false)), (Strings{"\u2581", "<0x61>", "\u2581", "<0x62>"}));
}

TEST(Spm, SpacePrefixIsAddedOnceAndRemovedByDecode) {
  const auto tok = Tokenizer::create(tiny_spm_spec());
  for (std::string s : {"hello", " hello", "hello  hello ", "h\xC3\xA9llo", "", "\xFF" "a"}) {
    EXPECT_EQ(tok->decode(tok->encode(s, false)), s);
  }
  TokenizerSpec no_prefix = tiny_spm_spec();
  no_prefix.add_space_prefix = false;
  const auto plain = Tokenizer::create(no_prefix);
  EXPECT_EQ(texts(*plain, plain->encode("hello", false)), (Strings{"he", "llo"}));
  EXPECT_EQ(plain->decode(plain->encode(" hello", false)), " hello");
}

TEST(Spm, SpecialTokensAndPrefixOnlyAtTheStart) {
  const auto tok = Tokenizer::create(tiny_spm_spec());
  EXPECT_EQ(texts(*tok, tok->encode("<s>hello", true)), (Strings{"<s>", "he", "llo"}));
  EXPECT_EQ(texts(*tok, tok->encode("hello</s>", true)), (Strings{"\u2581hello", "</s>"}));
  EXPECT_EQ(tok->encode("<s>", false).size(), 4u);  // ▁ and the three bytes of "<s>"
}

TEST(Spm, BadByteTokenIsAFileFormatError) {
  TokenizerSpec spec = tiny_spm_spec();
  spec.tokens[3] = "<0xZZ>";
  EXPECT_THROW(Tokenizer::create(spec), FileFormatError);
  spec = tiny_spm_spec();
  spec.scores.pop_back();
  EXPECT_THROW(Tokenizer::create(spec), FileFormatError);
}

}  // namespace
}  // namespace exactly
