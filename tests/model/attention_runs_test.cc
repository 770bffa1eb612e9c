// The split of a step's sequences into decode runs and prompt runs, checked
// against a brute-force statement of the rule on random batches.
#include "model/attention_runs.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>


namespace exactly {
namespace {

struct Batch {
  std::vector<int32_t> query_start{0};
  std::vector<int32_t> seq_lens;
  void add(int32_t q_len, int32_t ctx) {
    query_start.push_back(query_start.back() + q_len);
    seq_lens.push_back(ctx);
  }
};

TEST(AttentionRuns, DecodeRowsBesidePromptChunks) {
  Batch b;
  for (int i = 0; i < 3; ++i) b.add(1, 100 + i);  // decodes
  b.add(512, 512);                                // a prompt chunk
  b.add(300, 812);                                // a later chunk of a longer prompt
  b.add(1, 7);                                    // a decode after them
  b.add(4, 40);                                   // a verify of 3 drafts
  std::vector<AttentionRun> runs;
  split_attention_runs(b.query_start, b.seq_lens, 8, runs);
  ASSERT_EQ(runs.size(), 4u);
  EXPECT_TRUE(runs[0].single_token);
  EXPECT_EQ(runs[0].first_seq, 0);
  EXPECT_EQ(runs[0].num_seqs, 3);
  EXPECT_EQ(runs[0].max_query_len, 1);
  EXPECT_EQ(runs[0].max_seq_len, 102);
  EXPECT_FALSE(runs[1].single_token);
  EXPECT_EQ(runs[1].first_seq, 3);
  EXPECT_EQ(runs[1].num_seqs, 2);
  EXPECT_EQ(runs[1].max_query_len, 512);
  EXPECT_EQ(runs[1].max_seq_len, 812);
  EXPECT_TRUE(runs[2].single_token);
  EXPECT_EQ(runs[2].first_seq, 5);
  EXPECT_EQ(runs[2].max_seq_len, 7);
  EXPECT_FALSE(runs[3].single_token);
  EXPECT_EQ(runs[3].max_query_len, 4);
}

TEST(AttentionRuns, TooManyRunsBecomeOne) {
  Batch b;
  for (int i = 0; i < 6; ++i) b.add(i % 2 == 0 ? 1 : 9, 50 + i);
  std::vector<AttentionRun> runs;
  split_attention_runs(b.query_start, b.seq_lens, 3, runs);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_FALSE(runs[0].single_token);
  EXPECT_EQ(runs[0].num_seqs, 6);
  EXPECT_EQ(runs[0].max_query_len, 9);
  EXPECT_EQ(runs[0].max_seq_len, 55);
  split_attention_runs(b.query_start, b.seq_lens, 6, runs);
  EXPECT_EQ(runs.size(), 6u);
}

TEST(AttentionRuns, AllDecodeIsOneSingleTokenRun) {
  Batch b;
  for (int i = 0; i < 5; ++i) b.add(1, 10 * (i + 1));
  std::vector<AttentionRun> runs;
  split_attention_runs(b.query_start, b.seq_lens, 1, runs);
  ASSERT_EQ(runs.size(), 1u);
  EXPECT_TRUE(runs[0].single_token);
  EXPECT_EQ(runs[0].max_seq_len, 50);
}

// Random batches: the runs tile the sequences in order, alternate in kind,
// each holds only its kind, and their bounds are the exact maxima.
TEST(AttentionRuns, RandomBatchesAgainstTheRule) {
  std::mt19937 rng(7);
  std::vector<AttentionRun> runs;
  for (int trial = 0; trial < 2000; ++trial) {
    Batch b;
    const int n = static_cast<int>(rng() % 12);
    for (int s = 0; s < n; ++s) {
      const int32_t q = rng() % 3 == 0 ? 1 + static_cast<int32_t>(rng() % 40) : 1;
      b.add(q, q + static_cast<int32_t>(rng() % 100));
    }
    const int max_runs = 1 + static_cast<int>(rng() % 6);
    split_attention_runs(b.query_start, b.seq_lens, max_runs, runs);
    ASSERT_LE(static_cast<int>(runs.size()), max_runs);
    int32_t next = 0;
    for (size_t r = 0; r < runs.size(); ++r) {
      const AttentionRun& run = runs[r];
      ASSERT_EQ(run.first_seq, next);
      ASSERT_GT(run.num_seqs, 0);
      if (runs.size() > 1 && r > 0) {
        ASSERT_NE(run.single_token, runs[r - 1].single_token);
      }
      int32_t max_q = 0, max_len = 0;
      bool all_single = true;
      for (int32_t s = run.first_seq; s < run.first_seq + run.num_seqs; ++s) {
        const int32_t q = b.query_start[static_cast<size_t>(s) + 1] - b.query_start[static_cast<size_t>(s)];
        max_q = std::max(max_q, q);
        max_len = std::max(max_len, b.seq_lens[static_cast<size_t>(s)]);
        all_single = all_single && q == 1;
        if (runs.size() > 1) {
          ASSERT_EQ(q == 1, run.single_token);
        }
      }
      ASSERT_EQ(run.single_token, all_single);
      ASSERT_EQ(run.max_query_len, max_q);
      ASSERT_EQ(run.max_seq_len, max_len);
      next += run.num_seqs;
    }
    ASSERT_EQ(next, n);
  }
}

TEST(AttentionRuns, MismatchedArraysAreRefused) {
  std::vector<int32_t> query_start{0, 1, 2}, seq_lens{5};
  std::vector<AttentionRun> runs;
  EXPECT_DEATH(split_attention_runs(query_start, seq_lens, 4, runs), "3 query starts for 1 sequences");
}

}  // namespace
}  // namespace exactly
