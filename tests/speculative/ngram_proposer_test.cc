#include "speculative/ngram_proposer.h"

#include <gtest/gtest.h>

#include <chrono>
#include <cstdio>
#include <vector>

#include "sample/rng.h"

namespace exactly {
namespace {

using Tokens = std::vector<int32_t>;

// The rule written out directly: for n from n_max down to n_min, the latest
// start s with tokens[s, s+n) equal to the last n tokens and s + n < len.
Tokens reference_proposal(const Tokens& t, const NgramConfig& c, int32_t k) {
  const size_t len = t.size();
  for (size_t n = static_cast<size_t>(c.n_max); n >= static_cast<size_t>(c.n_min); --n) {
    if (n + 1 > len) continue;
    for (size_t s = len - n; s-- > 0;) {
      bool equal = true;
      for (size_t j = 0; j < n && equal; ++j) equal = t[s + j] == t[len - n + j];
      if (equal) {
        const size_t end = std::min(len, s + n + static_cast<size_t>(k));
        return Tokens(t.begin() + static_cast<ptrdiff_t>(s + n), t.begin() + static_cast<ptrdiff_t>(end));
      }
    }
  }
  return {};
}

TEST(NgramProposer, RepeatedPhraseProposesWhatFollowedIt) {
  const NgramProposer proposer;
  EXPECT_EQ(proposer.propose(Tokens{1, 2, 3, 4, 5, 6, 9, 1, 2, 3}, 5), (Tokens{4, 5, 6, 9, 1}));
}

TEST(NgramProposer, NoMatchProposesNothing) {
  const NgramProposer proposer;
  EXPECT_TRUE(proposer.propose(Tokens{1, 2, 3, 4, 5}, 4).empty());
  EXPECT_TRUE(proposer.propose(Tokens{7}, 4).empty());
  EXPECT_TRUE(proposer.propose(Tokens{}, 4).empty());
  EXPECT_TRUE(proposer.propose(Tokens{1, 2, 1}, 0).empty());
}

TEST(NgramProposer, TheSuffixItselfIsNotAMatch) {
  const NgramProposer proposer;
  EXPECT_TRUE(proposer.propose(Tokens{5, 6, 7}, 3).empty());
  EXPECT_EQ(proposer.propose(Tokens{7, 1, 2, 7}, 5), (Tokens{1, 2, 7}));
}

TEST(NgramProposer, CappedAtKAndAtTheEndOfTheContext) {
  const NgramProposer proposer;
  EXPECT_EQ(proposer.propose(Tokens{1, 2, 3, 4, 5, 1, 2}, 2), (Tokens{3, 4}));
  EXPECT_EQ(proposer.propose(Tokens{1, 2, 3, 1, 2}, 5), (Tokens{3, 1, 2}));
  // Overlapping match in a run: the continuation is what is left of the run.
  EXPECT_EQ(proposer.propose(Tokens{1, 1, 1, 1}, 3), (Tokens{1}));
}

TEST(NgramProposer, PrefersTheLongestMatchThenTheMostRecent) {
  const NgramProposer proposer;
  // '3' recurs at index 5 (then 11), but "1 2 3" only at 0..2 (then 10).
  EXPECT_EQ(proposer.propose(Tokens{1, 2, 3, 10, 5, 3, 11, 1, 2, 3}, 1), (Tokens{10}));
  // Two equally long matches of "1 2": the later one wins.
  EXPECT_EQ(proposer.propose(Tokens{1, 2, 7, 1, 2, 8, 1, 2}, 1), (Tokens{8}));
}

TEST(NgramProposer, NMaxAndNMinBoundTheMatchLength) {
  const Tokens t = {1, 2, 3, 9, 4, 2, 3, 8, 1, 2, 3};
  EXPECT_EQ(NgramProposer(NgramConfig{4, 1}).propose(t, 1), (Tokens{9}));
  // Capped at 2, "1 2 3" is no better than the later "2 3".
  EXPECT_EQ(NgramProposer(NgramConfig{2, 1}).propose(t, 1), (Tokens{8}));
  // Only a 1-gram match exists; n_min = 2 refuses it.
  const Tokens one_gram = {5, 9, 6, 7, 5};
  EXPECT_EQ(NgramProposer(NgramConfig{4, 1}).propose(one_gram, 2), (Tokens{9, 6}));
  EXPECT_TRUE(NgramProposer(NgramConfig{4, 2}).propose(one_gram, 2).empty());
}

TEST(NgramProposer, AgreesWithTheDirectRuleOnRandomSequences) {
  Rng rng(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const NgramConfig config{1 + static_cast<int32_t>(rng.next() % 5), 1};
    const NgramConfig c{config.n_max, 1 + static_cast<int32_t>(rng.next() % static_cast<uint64_t>(config.n_max))};
    const int32_t vocab = 2 + static_cast<int32_t>(rng.next() % 6);
    Tokens t(rng.next() % 40);
    for (auto& x : t) x = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
    const int32_t k = static_cast<int32_t>(rng.next() % 7);
    EXPECT_EQ(NgramProposer(c).propose(t, k), k == 0 ? Tokens{} : reference_proposal(t, c, k)) << trial;
  }
}

// Not a benchmark, a guard: an 8k-token context must cost microseconds, not
// milliseconds. Two full scans: a last token seen nowhere else (one comparison
// per position), and the worst case for the backward extension — all zeros
// but a 1 four from the end, so every position matches three tokens and fails
// on the fourth.
TEST(NgramProposer, EightThousandTokenContextsAreFast) {
  Tokens random(8192);
  Rng rng(3);
  for (auto& x : random) x = static_cast<int32_t>(rng.next() % 32000);
  random.back() = -1;
  Tokens adversarial(8192, 0);
  adversarial[adversarial.size() - 4] = 1;
  const NgramProposer proposer;
  EXPECT_TRUE(proposer.propose(random, 5).empty());
  // The most recent "0 0 0" ends just before the 1; what followed runs to the end.
  EXPECT_EQ(proposer.propose(adversarial, 5), (Tokens{1, 0, 0, 0}));
  for (const Tokens* t : {&random, &adversarial}) {
    constexpr int kCalls = 200;
    size_t proposed = 0;
    const auto start = std::chrono::steady_clock::now();
    for (int i = 0; i < kCalls; ++i) proposed += proposer.propose(*t, 5).size();
    const double us =
        std::chrono::duration<double, std::micro>(std::chrono::steady_clock::now() - start).count() / kCalls;
    std::printf("ngram propose, 8192 tokens, %s: %.1f us per call (%zu drafts)\n",
                t == &random ? "no match" : "3-token partial matches everywhere", us, proposed / kCalls);
    EXPECT_LT(us, 2000.0);
  }
}

}  // namespace
}  // namespace exactly
