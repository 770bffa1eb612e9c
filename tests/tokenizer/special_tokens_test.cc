#include "tokenizer/special_tokens.h"

#include <gtest/gtest.h>

#include "test_vocab.h"

namespace exactly {
namespace {

using testing::byte_level_spec;
using testing::pieces;
using Strings = std::vector<std::string>;

TEST(SpecialTokens, ParsedOnlyWhenAsked) {
  const auto tok = Tokenizer::create(byte_level_spec({}, "gpt2", {"<|im_start|>", "<|im_end|>"}));
  const int32_t start = *tok->find_token("<|im_start|>"), end = *tok->find_token("<|im_end|>");
  const auto with = tok->encode("<|im_start|>hi<|im_end|>", true);
  ASSERT_EQ(with.size(), 4u);
  EXPECT_EQ(with.front(), start);
  EXPECT_EQ(with.back(), end);
  const auto without = tok->encode("<|im_start|>hi<|im_end|>", false);
  EXPECT_EQ(without.size(), std::string("<|im_start|>hi<|im_end|>").size());  // one byte token each
  for (int32_t id : without) EXPECT_LT(id, 256);
  EXPECT_EQ(tok->decode(without), "<|im_start|>hi<|im_end|>");
  // Control tokens render only on request.
  EXPECT_EQ(tok->decode(with), "hi");
  EXPECT_EQ(tok->decode(with, true), "<|im_start|>hi<|im_end|>");
}

TEST(SpecialTokens, LongestMatchWinsAndTextAroundIsKept) {
  std::vector<std::string> tokens = {"<a>", "<a>b", "x"};
  std::vector<TokenType> types = {TokenType::kControl, TokenType::kUserDefined, TokenType::kNormal};
  const SpecialTokenSplitter splitter(tokens, types);
  const auto f = splitter.split("z<a>b<a>x<a", true);
  ASSERT_EQ(f.size(), 4u);
  EXPECT_EQ(f[0].token, -1);
  EXPECT_EQ(f[0].text, "z");
  EXPECT_EQ(f[1].token, 1);  // "<a>b", not "<a>" + "b"
  EXPECT_EQ(f[2].token, 0);
  EXPECT_EQ(f[3].token, -1);
  EXPECT_EQ(f[3].text, "x<a");  // normal tokens and partial special text stay raw
  EXPECT_EQ(f[3].offset, 8u);
}

TEST(SpecialTokens, UserDefinedSplitWhetherOrNotSpecialsAreParsed) {
  std::vector<std::string> tokens = {"<a>", "<a>b", "x"};
  std::vector<TokenType> types = {TokenType::kControl, TokenType::kUserDefined, TokenType::kNormal};
  const SpecialTokenSplitter splitter(tokens, types);
  const auto f = splitter.split("<a>b<a>", false);  // the control token <a> stays text
  ASSERT_EQ(f.size(), 2u);
  EXPECT_EQ(f[0].token, 1);
  EXPECT_EQ(f[1].token, -1);
  EXPECT_EQ(f[1].text, "<a>");
  EXPECT_EQ(f[1].offset, 4u);
}

TEST(SpecialTokens, EndOfGenerationAndMetadata) {
  TokenizerSpec spec = byte_level_spec({}, "gpt2", {"<|endoftext|>", "<|im_start|>", "<|im_end|>", "<|eot_id|>"});
  const int32_t base = 256;
  spec.eos = base;
  spec.bos = base + 1;
  spec.chat_template = "{{ messages }}";
  const auto tok = Tokenizer::create(spec);
  EXPECT_TRUE(tok->is_end_of_generation(base));      // EOS
  EXPECT_FALSE(tok->is_end_of_generation(base + 1)); // <|im_start|>
  EXPECT_TRUE(tok->is_end_of_generation(base + 2));  // <|im_end|>
  EXPECT_TRUE(tok->is_end_of_generation(base + 3));  // <|eot_id|>
  EXPECT_FALSE(tok->is_end_of_generation('a'));
  EXPECT_EQ(tok->bos_id(), base + 1);
  EXPECT_FALSE(tok->add_bos());  // byte-level BPE default
  EXPECT_EQ(tok->chat_template(), "{{ messages }}");
}

}  // namespace
}  // namespace exactly
