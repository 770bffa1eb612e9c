#include "kvcache/kv_cache_manager.h"

#include <gtest/gtest.h>

#include <vector>

namespace exactly {
namespace {

using Blocks = std::vector<BlockId>;
using Tokens = std::vector<int32_t>;

Blocks table_of(const KVCacheManager& kv, SeqId seq) {
  std::span<const BlockId> t = kv.block_table(seq);
  return Blocks(t.begin(), t.end());
}

// Starts `seq` from whatever the cache holds and computes the whole prompt.
void run_prompt(KVCacheManager& kv, SeqId seq, const Tokens& prompt) {
  const PrefixHit hit = kv.find_cached_prefix(prompt);
  ASSERT_TRUE(kv.allocate_new(seq, prompt, hit, static_cast<int64_t>(prompt.size()) - hit.num_tokens));
  kv.commit_computed(seq, prompt, static_cast<int64_t>(prompt.size()));
  kv.check_integrity();
}

TEST(KVCacheManager, EvictsLeastRecentlyUsedAndSequenceTailsFirst) {
  KVCacheManager kv(6, 2);
  const Tokens a = {1, 2, 3, 4, 5};
  run_prompt(kv, 0, a);
  EXPECT_EQ(table_of(kv, 0), (Blocks{0, 1, 2}));
  kv.free(0);
  kv.check_integrity();
  // Released tail first, so the head block is the last to be evicted.
  EXPECT_EQ(kv.pool().free_list(), (Blocks{3, 4, 5, 2, 1, 0}));
  EXPECT_EQ(kv.find_cached_prefix(a).blocks, (Blocks{0, 1}));

  run_prompt(kv, 1, {9, 9, 9, 9, 9, 9, 9});  // four blocks: the never used ones, then a's uncached tail
  EXPECT_EQ(table_of(kv, 1), (Blocks{3, 4, 5, 2}));
  EXPECT_EQ(kv.find_cached_prefix(a).blocks, (Blocks{0, 1}));

  run_prompt(kv, 2, {8, 8});  // evicts a's second block, keeps its first
  EXPECT_EQ(table_of(kv, 2), (Blocks{1}));
  const PrefixHit hit = kv.find_cached_prefix(a);
  EXPECT_EQ(hit.blocks, (Blocks{0}));
  EXPECT_EQ(hit.num_tokens, 2);
}

TEST(KVCacheManager, FullPromptHitLeavesOneTokenToCompute) {
  KVCacheManager kv(8, 2);
  run_prompt(kv, 0, {1, 2, 3, 4});
  kv.free(0);
  EXPECT_EQ(kv.find_cached_prefix(Tokens{1, 2, 3, 4}).num_tokens, 2);
  EXPECT_EQ(kv.find_cached_prefix(Tokens{1, 2, 3, 4, 5}).num_tokens, 4);
  EXPECT_EQ(kv.find_cached_prefix(Tokens{1, 2, 3}).num_tokens, 2);
  EXPECT_EQ(kv.find_cached_prefix(Tokens{1, 2}).num_tokens, 0);
  EXPECT_EQ(kv.find_cached_prefix(Tokens{1}).num_tokens, 0);
  EXPECT_EQ(kv.find_cached_prefix(Tokens{}).num_tokens, 0);
  EXPECT_EQ(kv.find_cached_prefix(Tokens{1, 9, 3, 4, 5}).num_tokens, 0);
}

TEST(KVCacheManager, ForkCopiesTheSharedPartialBlockOnFirstWriteOnly) {
  KVCacheManager kv(10, 4);
  run_prompt(kv, 0, {1, 2, 3, 4, 5, 6});
  kv.fork(0, 1);
  kv.check_integrity();
  const Blocks shared = table_of(kv, 0);
  ASSERT_EQ(shared.size(), 2u);
  EXPECT_EQ(kv.pool().ref_count(shared[0]), 2);
  EXPECT_EQ(kv.pool().ref_count(shared[1]), 2);

  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 6, 1, copies));
  kv.check_integrity();
  ASSERT_EQ(copies.size(), 1u);
  EXPECT_EQ(copies[0].src, shared[1]);
  EXPECT_EQ(copies[0].dst, table_of(kv, 1)[1]);
  EXPECT_NE(copies[0].dst, shared[1]);
  EXPECT_EQ(table_of(kv, 1)[0], shared[0]) << "the full block stays shared";
  EXPECT_EQ(kv.pool().ref_count(shared[0]), 2);
  EXPECT_EQ(kv.pool().ref_count(shared[1]), 1);

  copies.clear();
  ASSERT_TRUE(kv.allocate(0, 6, 1, copies));  // the parent is now the only holder: writes in place
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(table_of(kv, 0), shared);
  kv.check_integrity();
}

TEST(KVCacheManager, ForkAtABlockBoundaryNeedsNoCopy) {
  KVCacheManager kv(10, 4);
  run_prompt(kv, 0, {1, 2, 3, 4, 5, 6, 7, 8});
  kv.fork(0, 1);
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(1, 8, 1, copies));
  ASSERT_TRUE(kv.allocate(0, 8, 1, copies));
  EXPECT_TRUE(copies.empty());
  EXPECT_EQ(table_of(kv, 0)[1], table_of(kv, 1)[1]);
  EXPECT_NE(table_of(kv, 0)[2], table_of(kv, 1)[2]);
  kv.check_integrity();
}

TEST(KVCacheManager, TruncateDropsTheHashesOfDroppedTokens) {
  KVCacheManager kv(8, 2);
  const Tokens prompt = {1, 2, 3, 4, 5, 6};
  run_prompt(kv, 0, prompt);
  EXPECT_EQ(kv.stats().cached_blocks, 3);
  kv.truncate(0, 3);
  kv.check_integrity();
  EXPECT_EQ(table_of(kv, 0).size(), 2u);
  EXPECT_EQ(kv.num_reserved_tokens(0), 3);
  EXPECT_EQ(kv.pool().hash_of(table_of(kv, 0)[1]), std::nullopt) << "the cut block will be rewritten";
  EXPECT_EQ(kv.find_cached_prefix(Tokens{1, 2, 3, 4, 5, 6, 7}).num_tokens, 2);

  // Rewriting the cut block with other tokens and committing caches the new contents.
  std::vector<BlockCopy> copies;
  ASSERT_TRUE(kv.allocate(0, 3, 1, copies));
  kv.commit_computed(0, Tokens{1, 2, 3, 9}, 4);
  kv.check_integrity();
  EXPECT_EQ(kv.find_cached_prefix(Tokens{1, 2, 3, 9, 0}).num_tokens, 4);
}

TEST(KVCacheManager, RefusedAllocationChangesNothing) {
  KVCacheManager kv(3, 2);
  ASSERT_TRUE(kv.allocate_new(0, Tokens{1, 2, 3, 4}, {}, 4));
  EXPECT_FALSE(kv.allocate_new(1, Tokens{5, 6, 7}, {}, 3));
  EXPECT_FALSE(kv.contains(1));
  std::vector<BlockCopy> copies;
  EXPECT_FALSE(kv.allocate(0, 4, 3, copies));
  EXPECT_EQ(table_of(kv, 0).size(), 2u);
  EXPECT_EQ(kv.num_free_blocks(), 1);
  EXPECT_TRUE(kv.allocate(0, 4, 2, copies));
  EXPECT_EQ(kv.num_free_blocks(), 0);
  kv.check_integrity();
}

TEST(KVCacheManager, FreeCachedHitsCountAsFreeAndAreNotEvictedByTheirOwnAllocation) {
  KVCacheManager kv(3, 2);
  run_prompt(kv, 0, {1, 2, 3, 4, 5});
  kv.free(0);
  const Tokens b = {1, 2, 3, 4, 6};
  const PrefixHit hit = kv.find_cached_prefix(b);
  ASSERT_EQ(hit.num_tokens, 4);
  ASSERT_TRUE(kv.allocate_new(1, b, hit, 1));
  kv.check_integrity();
  EXPECT_EQ(table_of(kv, 1), (Blocks{0, 1, 2}));
  EXPECT_EQ(kv.num_free_blocks(), 0);
  const KVCacheStats st = kv.stats();
  EXPECT_EQ(st.prefix_query_tokens, 10);
  EXPECT_EQ(st.prefix_hit_tokens, 4);
  EXPECT_EQ(st.reserved_tokens, 5);
  EXPECT_EQ(st.used_blocks, 3);
  EXPECT_EQ(st.used_slots, 6);
}

TEST(KVCacheManager, SamePromptComputedTwiceAtOnceIsCachedOnce) {
  KVCacheManager kv(8, 2);
  const Tokens prompt = {1, 2, 3, 4, 5};
  ASSERT_TRUE(kv.allocate_new(0, prompt, {}, 5));
  ASSERT_TRUE(kv.allocate_new(1, prompt, {}, 5));
  kv.commit_computed(0, prompt, 5);
  kv.commit_computed(1, prompt, 5);
  kv.check_integrity();
  EXPECT_EQ(kv.stats().cached_blocks, 2);
  kv.free(0);
  kv.free(1);
  kv.check_integrity();
  EXPECT_EQ(kv.find_cached_prefix(prompt).blocks, (Blocks{0, 1}));
  EXPECT_EQ(kv.num_free_blocks(), 8);
}

TEST(KVCacheManager, WithoutPrefixCachingNothingIsCached) {
  KVCacheManager kv(8, 2, false);
  run_prompt(kv, 0, {1, 2, 3, 4, 5});
  kv.free(0);
  EXPECT_EQ(kv.find_cached_prefix(Tokens{1, 2, 3, 4, 5}).num_tokens, 0);
  EXPECT_EQ(kv.stats().cached_blocks, 0);
  EXPECT_EQ(kv.stats().prefix_query_tokens, 0);
  kv.check_integrity();
}

TEST(KVCacheManagerDeath, IntegrityCheckCatchesAWrongReferenceCount) {
  KVCacheManager kv(4, 2);
  ASSERT_TRUE(kv.allocate_new(0, Tokens{1, 2, 3}, {}, 3));
  // A pool-level reference without a table behind it breaks the invariant.
  const_cast<BlockPool&>(kv.pool()).acquire(0);
  EXPECT_DEATH(kv.check_integrity(), "references");
}

}  // namespace
}  // namespace exactly
