// Expected splits are worked out by hand from the published regexes (with
// real lookahead semantics) and the Hugging Face Isolated split behaviour.
#include "tokenizer/pretokenizer.h"

#include <gtest/gtest.h>

#include "core/error.h"

namespace exactly {
namespace {

using Pieces = std::vector<std::string>;

Pieces split(std::string_view pre, std::string_view text) {
  const PreTokenizer p(pre);
  Pieces out;
  size_t expected_begin = 0;
  for (const PieceRange& r : p.split(text)) {
    EXPECT_EQ(r.begin, expected_begin) << "pieces must cover the text without gaps";
    EXPECT_LT(r.begin, r.end) << "pieces must not be empty";
    out.emplace_back(text.substr(r.begin, r.end - r.begin));
    expected_begin = r.end;
  }
  EXPECT_EQ(expected_begin, text.size());
  return out;
}

TEST(PreTokenizerGpt2, WordsKeepTheirLeadingSpace) {
  EXPECT_EQ(split("gpt2", "Hello world"), (Pieces{"Hello", " world"}));
  EXPECT_EQ(split("gpt2", ""), Pieces{});
}

TEST(PreTokenizerGpt2, WhitespaceRunGivesItsLastSpaceToTheNextWord) {
  EXPECT_EQ(split("gpt2", "  leading"), (Pieces{" ", " leading"}));
  EXPECT_EQ(split("gpt2", "a   b"), (Pieces{"a", "  ", " b"}));
  EXPECT_EQ(split("gpt2", "trailing   "), (Pieces{"trailing", "   "}));
  EXPECT_EQ(split("gpt2", "x\n\ny"), (Pieces{"x", "\n", "\n", "y"}));
  EXPECT_EQ(split("gpt2", "x \n y"), (Pieces{"x", " \n", " y"}));
  EXPECT_EQ(split("gpt2", "a\t\t!"), (Pieces{"a", "\t", "\t", "!"}));
  EXPECT_EQ(split("gpt2", "a  !"), (Pieces{"a", " ", " !"}));
}

TEST(PreTokenizerGpt2, UnicodeWhitespaceCountsAsSpace) {
  // NBSP is \s but not the literal space that may prefix a word.
  EXPECT_EQ(split("gpt2", "a\u00A0\u00A0b"), (Pieces{"a", "\u00A0", "\u00A0", "b"}));
  EXPECT_EQ(split("gpt2", "a\u3000 b"), (Pieces{"a", "\u3000", " b"}));
}

TEST(PreTokenizerGpt2, ContractionsAreLowerCaseOnly) {
  EXPECT_EQ(split("gpt2", "I'm don't they're we've you'll he'd it's"),
            (Pieces{"I", "'m", " don", "'t", " they", "'re", " we", "'ve", " you", "'ll", " he", "'d", " it", "'s"}));
  EXPECT_EQ(split("gpt2", "DON'T"), (Pieces{"DON", "'", "T"}));
  EXPECT_EQ(split("gpt2", "'sup"), (Pieces{"'s", "up"}));
}

TEST(PreTokenizerGpt2, NumbersPunctuationScripts) {
  EXPECT_EQ(split("gpt2", "abc12345 67"), (Pieces{"abc", "12345", " 67"}));
  EXPECT_EQ(split("gpt2", "Hello!!! ...?"), (Pieces{"Hello", "!!!", " ...?"}));
  EXPECT_EQ(split("gpt2", "你好世界 こんにちは"), (Pieces{"你好世界", " こんにちは"}));
  EXPECT_EQ(split("gpt2", "hi \U0001F44B\U0001F3FD!"), (Pieces{"hi", " \U0001F44B\U0001F3FD!"}));
  EXPECT_EQ(split("gpt2", "caf\u00E9 e\u0301"), (Pieces{"caf\u00E9", " e", "\u0301"}));
}

TEST(PreTokenizerLlama3, CaseInsensitiveContractionsAndDigitTriples) {
  EXPECT_EQ(split("llama-bpe", "DON'T we'LL"), (Pieces{"DON", "'T", " we", "'LL"}));
  EXPECT_EQ(split("llama-bpe", "1234567"), (Pieces{"123", "456", "7"}));
  EXPECT_EQ(split("llama-bpe", "$100"), (Pieces{"$", "100"}));
  EXPECT_EQ(split("llama-bpe", ",hello ...hello"), (Pieces{",hello", " ...", "hello"}));
}

TEST(PreTokenizerLlama3, NewlinesStayWithPrecedingSpaces) {
  EXPECT_EQ(split("llama-bpe", "Hello\n\nworld"), (Pieces{"Hello", "\n\n", "world"}));
  EXPECT_EQ(split("llama-bpe", "  \n  x"), (Pieces{"  \n", " ", " x"}));
  EXPECT_EQ(split("llama-bpe", "end.\n"), (Pieces{"end", ".\n"}));
  EXPECT_EQ(split("llama-bpe", "a  "), (Pieces{"a", "  "}));
}

TEST(PreTokenizerQwen2, SingleDigits) {
  EXPECT_EQ(split("qwen2", "x=2024"), (Pieces{"x", "=", "2", "0", "2", "4"}));
  EXPECT_EQ(split("qwen2", "It'S"), (Pieces{"It", "'S"}));
}

TEST(PreTokenizerSmollm, DigitsAreIsolatedBeforeTheGpt2Regex) {
  EXPECT_EQ(split("smollm", " 123"), (Pieces{" ", "1", "2", "3"}));
  EXPECT_EQ(split("smollm", "v2.0 is  42x"), (Pieces{"v", "2", ".", "0", " is", "  ", "4", "2", "x"}));
  EXPECT_EQ(split("smollm", "٣٤"), (Pieces{"٣", "٤"}));  // Arabic-Indic digits are \p{N} too
}

TEST(PreTokenizerDefault, PunctuationThenGpt2ThenDigitGroups) {
  EXPECT_EQ(split("default", "Hello, world! 1234"), (Pieces{"Hello", ",", " world", "!", " ", "123", "4"}));
}

TEST(PreTokenizer, InvalidBytesAreKeptAsSymbols) {
  EXPECT_EQ(split("gpt2", "a\xFF" "b"), (Pieces{"a", "\xFF", "b"}));
  EXPECT_EQ(split("gpt2", "ab \xC3"), (Pieces{"ab", " \xC3"}));
  EXPECT_EQ(split("llama-bpe", "\xE2\x82 x"), (Pieces{"\xE2\x82", " x"}));
}

TEST(PreTokenizer, UnknownNameIsAFileFormatError) {
  try {
    PreTokenizer p("no-such-pre");
    FAIL() << "expected FileFormatError";
  } catch (const FileFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.pre"), std::string::npos);
  }
}

}  // namespace
}  // namespace exactly
