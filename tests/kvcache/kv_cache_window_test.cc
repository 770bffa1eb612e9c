// A KV window: the blocks a sequence holds stay bounded however long it
// grows, released blocks return to the pool, and prefix hits over released
// blocks stay exact.
#include <gtest/gtest.h>

#include <algorithm>
#include <numeric>
#include <vector>

#include "kvcache/kv_cache_manager.h"

namespace exactly {
namespace {

using Tokens = std::vector<int32_t>;

int64_t held_blocks(const KVCacheManager& kv, SeqId seq) {
  std::span<const BlockId> t = kv.block_table(seq);
  return std::count_if(t.begin(), t.end(), [](BlockId b) { return b != kNoBlock; });
}

Tokens counting(int32_t n, int32_t first = 1) {
  Tokens t(static_cast<size_t>(n));
  std::iota(t.begin(), t.end(), first);
  return t;
}

// Computes `tokens[computed, computed + n)` of `seq` and commits them.
void compute(KVCacheManager& kv, SeqId seq, const Tokens& tokens, int64_t computed, int64_t n) {
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(seq, computed, n, copies));
  EXPECT_TRUE(copies.empty());
  kv.commit_computed(seq, tokens, computed + n);
  kv.check_integrity();
}

TEST(KVCacheWindow, ALongDecodeHoldsOnlyItsWindow) {
  constexpr int32_t kWindow = 10, kBlock = 4;
  const int64_t bound = (kWindow + kBlock - 1) / kBlock + 1;  // ceil(W / block) + 1
  KVCacheManager kv(static_cast<int32_t>(bound), kBlock, true, kWindow);
  EXPECT_EQ(kv.max_blocks_held(1000, 1), bound);
  EXPECT_EQ(kv.max_blocks_held(6, 1), 2) << "a short sequence holds its blocks only";
  const Tokens tokens = counting(200);  // 50 blocks through a pool of 4
  ASSERT_TRUE(kv.allocate_new(0, tokens, {}, 1));
  kv.commit_computed(0, tokens, 1);
  for (int64_t pos = 1; pos < 200; ++pos) {
    compute(kv, 0, tokens, pos, 1);
    std::span<const BlockId> table = kv.block_table(0);
    ASSERT_EQ(static_cast<int64_t>(table.size()), pos / kBlock + 1);
    for (int64_t i = 0; i < static_cast<int64_t>(table.size()); ++i) {
      const bool before_window = (i + 1) * kBlock <= pos - kWindow + 1;
      ASSERT_EQ(table[i] == kNoBlock, before_window) << "position " << pos << " block " << i;
    }
    ASSERT_LE(held_blocks(kv, 0), bound) << "position " << pos;
    ASSERT_EQ(kv.num_free_blocks(), kv.num_blocks() - held_blocks(kv, 0)) << "released blocks return to the pool";
    ASSERT_EQ(kv.stats().reserved_tokens, (pos + 1) - (pos / kBlock + 1 - held_blocks(kv, 0)) * kBlock);
  }
  kv.free(0);
  EXPECT_EQ(kv.num_free_blocks(), kv.num_blocks());
  kv.check_integrity();
}

TEST(KVCacheWindow, AStepHoldsTheWindowOfItsFirstQueryAndItsTokens) {
  KVCacheManager kv(64, 4, true, 6);
  const Tokens tokens = counting(100);
  ASSERT_TRUE(kv.allocate_new(0, tokens, {}, 30));
  kv.commit_computed(0, tokens, 30);
  EXPECT_EQ(held_blocks(kv, 0), 8) << "a first chunk releases nothing";
  compute(kv, 0, tokens, 30, 9);  // queries 30..38 read from 25: blocks 6..9
  EXPECT_EQ(held_blocks(kv, 0), 4);
  EXPECT_LE(held_blocks(kv, 0), kv.max_blocks_held(100, 9));
  EXPECT_EQ(kv.max_blocks_held(100, 9), (6 - 1 + 9 + 4 - 2) / 4 + 1);
}

TEST(KVCacheWindow, ReleasedBlocksStayCachedAndAHitTakesOnlyItsWindow) {
  constexpr int32_t kWindow = 6, kBlock = 2;
  KVCacheManager kv(16, kBlock, true, kWindow);
  const Tokens prompt = counting(20);
  ASSERT_TRUE(kv.allocate_new(0, prompt, {}, 4));
  kv.commit_computed(0, prompt, 4);
  for (int64_t at = 4; at < 20; at += 4) compute(kv, 0, prompt, at, 4);
  EXPECT_EQ(held_blocks(kv, 0), 5) << "queries 16..19 read from 11: blocks 5..9";
  EXPECT_EQ(kv.stats().cached_blocks, 10) << "released blocks keep their hashes";

  Tokens longer = prompt;
  longer.push_back(99);
  const PrefixHit hit = kv.find_cached_prefix(longer);
  ASSERT_EQ(hit.num_tokens, 20) << "every block is still cached";
  const int32_t free_before = kv.num_free_blocks();
  ASSERT_TRUE(kv.allocate_new(1, longer, hit, 1));
  kv.check_integrity();
  std::span<const BlockId> table = kv.block_table(1);
  ASSERT_EQ(table.size(), 11u);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(table[i], kNoBlock) << "block " << i << " lies before 20's window";
  for (size_t i = 7; i < 10; ++i) EXPECT_EQ(table[i], hit.blocks[i]);
  EXPECT_EQ(kv.num_free_blocks(), free_before - 1) << "shared hits and one fresh block; the rest not taken";

  // Filling the pool evicts released blocks, oldest first. A hit needs only
  // the blocks its window reads (the hash chain comes from the tokens), so it
  // survives the loss of the prompt's head, not that of a block it reads.
  kv.free(0);
  kv.free(1);
  ASSERT_TRUE(kv.allocate_new(2, counting(15, 500), {}, 15));  // 8 blocks: the never used ones, then blocks 0..2
  const PrefixHit headless = kv.find_cached_prefix(longer);
  ASSERT_EQ(headless.num_tokens, 20);
  for (size_t i = 0; i < 7; ++i) EXPECT_EQ(headless.blocks[i], kNoBlock);
  for (size_t i = 7; i < 10; ++i) {
    std::span<const int32_t> held = kv.pool().tokens_of(headless.blocks[i]);
    EXPECT_TRUE(std::equal(held.begin(), held.end(), longer.begin() + static_cast<ptrdiff_t>(i) * kBlock));
  }
  ASSERT_TRUE(kv.allocate_new(3, counting(12, 600), {}, 12));  // 6 blocks: 3..6, the unfilled one, block 9
  EXPECT_EQ(kv.find_cached_prefix(longer).num_tokens, 0) << "every shorter prefix's window lost a block too";
  kv.check_integrity();
}

TEST(KVCacheWindow, AForkSharesOnlyTheHeldBlocks) {
  KVCacheManager kv(16, 2, true, 4);
  const Tokens tokens = counting(12);
  ASSERT_TRUE(kv.allocate_new(0, tokens, {}, 6));
  kv.commit_computed(0, tokens, 6);
  compute(kv, 0, tokens, 6, 5);  // reads from 3: block 0 released
  kv.fork(0, 1);
  kv.check_integrity();
  EXPECT_EQ(kv.block_table(1)[0], kNoBlock);
  EXPECT_EQ(kv.pool().ref_count(kv.block_table(0)[1]), 2);
  kv.free(0);
  kv.free(1);
  EXPECT_EQ(kv.num_free_blocks(), 16);
  kv.check_integrity();
}

TEST(KVCacheWindowDeath, TruncatingIntoAReleasedWindowIsAnError) {
  KVCacheManager kv(16, 2, true, 4);
  const Tokens tokens = counting(12);
  ASSERT_TRUE(kv.allocate_new(0, tokens, {}, 6));
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(0, 6, 4, copies));  // releases blocks 0 (positions before 3)
  kv.truncate(0, 7);                          // reads from 4: still held
  EXPECT_DEATH(kv.truncate(0, 4), "released");
}

}  // namespace
}  // namespace exactly
