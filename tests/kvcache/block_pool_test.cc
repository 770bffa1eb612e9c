#include "kvcache/block_pool.h"

#include <gtest/gtest.h>

#include <vector>

namespace exactly {
namespace {

using Blocks = std::vector<BlockId>;

TEST(BlockPool, StartsWithEveryBlockFreeInIdOrder) {
  BlockPool pool(5, 4);
  pool.check_integrity();
  EXPECT_EQ(pool.num_free_blocks(), 5);
  EXPECT_EQ(pool.free_list(), (Blocks{0, 1, 2, 3, 4}));
}

TEST(BlockPool, ReusesLeastRecentlyFreedFirst) {
  BlockPool pool(4, 2);
  Blocks taken;
  for (int i = 0; i < 4; ++i) taken.push_back(pool.take_free());
  EXPECT_EQ(taken, (Blocks{0, 1, 2, 3}));
  EXPECT_EQ(pool.num_free_blocks(), 0);
  for (BlockId b : {2, 0, 3, 1}) pool.release(b);
  pool.check_integrity();
  EXPECT_EQ(pool.free_list(), (Blocks{2, 0, 3, 1}));
  EXPECT_EQ(pool.take_free(), 2);
  EXPECT_EQ(pool.take_free(), 0);
  pool.check_integrity();
}

TEST(BlockPool, CachedBlockStaysFindableUntilEvicted) {
  BlockPool pool(3, 2);
  const std::vector<int32_t> tokens = {7, 8};
  const BlockId b = pool.take_free();  // 0
  ASSERT_TRUE(pool.register_hash(b, kRootBlockHash, tokens));
  pool.release(b);
  pool.check_integrity();
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  EXPECT_EQ(pool.free_list(), (Blocks{1, 2, 0}));
  EXPECT_EQ(pool.find(kRootBlockHash, tokens), b);
  EXPECT_EQ(pool.take_free(), 1);
  EXPECT_EQ(pool.take_free(), 2);
  EXPECT_EQ(pool.find(kRootBlockHash, tokens), b) << "evicted before its turn";
  EXPECT_EQ(pool.take_free(), b);
  EXPECT_EQ(pool.find(kRootBlockHash, tokens), std::nullopt) << "reused block still cached";
  EXPECT_EQ(pool.num_cached_blocks(), 0);
  pool.check_integrity();
}

TEST(BlockPool, HitRemovesFromTheMiddleAndReleaseMovesToTheBack) {
  BlockPool pool(4, 1);
  for (int i = 0; i < 4; ++i) pool.take_free();
  for (BlockId b = 0; b < 4; ++b) {
    ASSERT_TRUE(pool.register_hash(b, kRootBlockHash, std::vector<int32_t>{100 + b}));
    pool.release(b);
  }
  EXPECT_EQ(pool.free_list(), (Blocks{0, 1, 2, 3}));
  pool.acquire(1);  // a prefix hit on a free cached block
  pool.check_integrity();
  EXPECT_EQ(pool.free_list(), (Blocks{0, 2, 3}));
  EXPECT_EQ(pool.ref_count(1), 1);
  pool.release(1);  // used again, so now the most recently used
  pool.check_integrity();
  EXPECT_EQ(pool.free_list(), (Blocks{0, 2, 3, 1}));
}

TEST(BlockPool, FindVerifiesParentAndTokens) {
  BlockPool pool(2, 2);
  const BlockId b = pool.take_free();
  ASSERT_TRUE(pool.register_hash(b, kRootBlockHash, std::vector<int32_t>{1, 2}));
  EXPECT_EQ(pool.find(kRootBlockHash, std::vector<int32_t>{1, 2}), b);
  EXPECT_EQ(pool.find(kRootBlockHash, std::vector<int32_t>{2, 1}), std::nullopt);
  EXPECT_EQ(pool.find(hash_block(kRootBlockHash, std::vector<int32_t>{1, 2}), std::vector<int32_t>{1, 2}),
            std::nullopt)
      << "same tokens after another prefix";
}

TEST(BlockPool, SecondBlockWithTheSamePrefixStaysUncached) {
  BlockPool pool(2, 2);
  const BlockId a = pool.take_free();
  const BlockId b = pool.take_free();
  const std::vector<int32_t> tokens = {3, 4};
  EXPECT_TRUE(pool.register_hash(a, kRootBlockHash, tokens));
  EXPECT_FALSE(pool.register_hash(b, kRootBlockHash, tokens));
  EXPECT_TRUE(pool.register_hash(a, kRootBlockHash, tokens)) << "re-registering is harmless";
  EXPECT_EQ(pool.hash_of(b), std::nullopt);
  EXPECT_EQ(pool.num_cached_blocks(), 1);
  pool.check_integrity();
}

TEST(BlockHash, ChainsDependOnParentTokensAndLength) {
  const BlockHash h = hash_block(kRootBlockHash, std::vector<int32_t>{1, 2, 3});
  EXPECT_NE(h, hash_block(kRootBlockHash, std::vector<int32_t>{1, 2, 4}));
  EXPECT_NE(h, hash_block(kRootBlockHash, std::vector<int32_t>{3, 2, 1}));
  EXPECT_NE(h, hash_block(kRootBlockHash, std::vector<int32_t>{1, 2}));
  EXPECT_NE(h, hash_block(h, std::vector<int32_t>{1, 2, 3}));
  EXPECT_EQ(h, hash_block(kRootBlockHash, std::vector<int32_t>{1, 2, 3}));
}

}  // namespace
}  // namespace exactly
