#include "tokenizer/bpe_tokenizer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <random>

#include "core/error.h"
#include "test_vocab.h"

namespace exactly {
namespace {

using testing::byte_level_spec;
using testing::pieces;
using Strings = std::vector<std::string>;

TEST(Bpe, LowestRankMergesFirst) {
  const auto ab_first = Tokenizer::create(byte_level_spec({{"a", "b"}, {"b", "c"}}));
  EXPECT_EQ(pieces(*ab_first, ab_first->encode("abc", false)), (Strings{"ab", "c"}));
  const auto bc_first = Tokenizer::create(byte_level_spec({{"b", "c"}, {"a", "b"}}));
  EXPECT_EQ(pieces(*bc_first, bc_first->encode("abc", false)), (Strings{"a", "bc"}));
}

TEST(Bpe, EqualRanksMergeLeftmostFirst) {
  const auto tok = Tokenizer::create(byte_level_spec({{"a", "a"}}));
  EXPECT_EQ(pieces(*tok, tok->encode("aaa", false)), (Strings{"aa", "a"}));
  EXPECT_EQ(pieces(*tok, tok->encode("aaaaa", false)), (Strings{"aa", "aa", "a"}));
}

TEST(Bpe, MergesBuildWholeWordsButNeverCrossPieces) {
  const auto tok = Tokenizer::create(
      byte_level_spec({{"h", "e"}, {"l", "l"}, {"he", "ll"}, {"hell", "o"}, {" ", "hello"}, {"o", " "}}));
  EXPECT_EQ(pieces(*tok, tok->encode("hello hello", false)), (Strings{"hello", " hello"}));
  // "o " is a merge, but the pre-tokenizer puts the space in the next piece.
  EXPECT_EQ(pieces(*tok, tok->encode("o x", false)), (Strings{"o", " ", "x"}));
}

TEST(Bpe, EveryByteIsRepresentable) {
  const auto tok = Tokenizer::create(byte_level_spec({}));
  std::string all;
  for (int b = 0; b < 256; ++b) all += static_cast<char>(b);
  const auto ids = tok->encode(all, false);
  EXPECT_EQ(ids.size(), 256u);
  EXPECT_EQ(tok->decode(ids), all);
}

TEST(Bpe, BadMergeIsAFileFormatErrorNamingTheKey) {
  TokenizerSpec spec = byte_level_spec({});
  spec.merges.push_back("a zzz");
  try {
    Tokenizer::create(spec);
    FAIL() << "expected FileFormatError";
  } catch (const FileFormatError& e) {
    EXPECT_NE(std::string(e.what()).find("tokenizer.ggml.merges[0]"), std::string::npos) << e.what();
  }
}

// Independent reference: the textbook quadratic loop over strings (find the
// adjacent pair with the lowest rank, leftmost among equals, merge, repeat).
Strings reference_bpe(const std::string& word, const std::vector<std::pair<std::string, std::string>>& merges) {
  Strings symbols;
  for (char c : word) symbols.emplace_back(1, c);
  for (;;) {
    size_t best_rank = merges.size(), best_pos = 0;
    for (size_t i = 0; i + 1 < symbols.size(); ++i) {
      for (size_t r = 0; r < best_rank; ++r) {
        if (merges[r].first == symbols[i] && merges[r].second == symbols[i + 1]) {
          best_rank = r, best_pos = i;
          break;
        }
      }
    }
    if (best_rank == merges.size()) return symbols;
    symbols[best_pos] += symbols[best_pos + 1];
    symbols.erase(symbols.begin() + static_cast<std::ptrdiff_t>(best_pos) + 1);
  }
}

TEST(Bpe, MatchesTheQuadraticReferenceOnRandomWords) {
  std::mt19937 rng(1234);
  const std::string alphabet = "abcd";
  for (int trial = 0; trial < 20; ++trial) {
    // Random merges over symbols that exist (single letters and earlier results).
    std::vector<std::pair<std::string, std::string>> merges;
    Strings known = {"a", "b", "c", "d"};
    for (int m = 0; m < 30; ++m) {
      const std::string l = known[rng() % known.size()], r = known[rng() % known.size()];
      bool dup = false;
      for (const auto& x : merges) dup = dup || (x.first == l && x.second == r);
      if (dup || l.size() + r.size() > 8) continue;
      merges.emplace_back(l, r);
      known.push_back(l + r);
    }
    const auto tok = Tokenizer::create(byte_level_spec(merges));
    for (int w = 0; w < 30; ++w) {
      std::string word;
      const size_t len = 1 + rng() % 40;
      for (size_t i = 0; i < len; ++i) word += alphabet[rng() % alphabet.size()];
      EXPECT_EQ(pieces(*tok, tok->encode(word, false)), reference_bpe(word, merges)) << word;
    }
  }
}

TEST(Bpe, DecodeOfEncodeIsTheInputForArbitraryBytes) {
  const auto tok = Tokenizer::create(byte_level_spec({{" ", "t"}, {"h", "e"}, {" t", "he"}, {"\xC3", "\xA9"}}));
  std::mt19937 rng(7);
  for (int trial = 0; trial < 200; ++trial) {
    std::string s;
    const size_t len = rng() % 30;
    for (size_t i = 0; i < len; ++i) s += static_cast<char>(rng() % 256);
    EXPECT_EQ(tok->decode(tok->encode(s, false)), s);
  }
  const std::string text = "the caf\xC3\xA9 \xF0\x9F\x98\x80 the\n\n  end\xFF";
  EXPECT_EQ(tok->decode(tok->encode(text, false)), text);
}

TEST(Bpe, LongWordIsFast) {
  // The heap-based merge loop is O(n log n); a quadratic loop would take seconds here.
  const auto tok = Tokenizer::create(byte_level_spec({{"a", "b"}, {"ab", "ab"}, {"abab", "abab"}}));
  std::string word;
  for (int i = 0; i < 100000; ++i) word += "ab";
  const auto start = std::chrono::steady_clock::now();
  const auto ids = tok->encode(word, false);
  const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_EQ(ids.size(), 200000u / 8);
  EXPECT_LT(seconds, 1.0);
}

}  // namespace
}  // namespace exactly
