#include "speculative/distribution_pool.h"

#include <gtest/gtest.h>

#include <set>

namespace exactly {
namespace {

TEST(DistributionPool, StartsWithNothingToLend) {
  DistributionPool pool;
  EXPECT_EQ(pool.take().capacity(), 0u);
}

TEST(DistributionPool, ServesTheStorageOfVectorsGivenBack) {
  DistributionPool pool;
  std::vector<std::vector<TokenProb>> dists(3);
  std::set<const TokenProb*> storage;
  for (auto& d : dists) {
    d.resize(1000, TokenProb{1, 0.5f, 0.25});
    storage.insert(d.data());
  }
  pool.give_back(dists);
  EXPECT_TRUE(dists.empty());
  EXPECT_EQ(pool.spare(), 3u);
  for (int i = 0; i < 3; ++i) {
    std::vector<TokenProb> v = pool.take();
    EXPECT_TRUE(v.empty());  // contents never leak into the next distribution
    EXPECT_GE(v.capacity(), 1000u);
    EXPECT_EQ(storage.erase(v.data()), 1u) << "a recycled vector must reuse storage given back, once";
  }
  EXPECT_EQ(pool.spare(), 0u);
  EXPECT_EQ(pool.take().capacity(), 0u);
}

TEST(DistributionPool, FillsUpToTheNumberAskedWithRoomForTheEntries) {
  DistributionPool pool;
  pool.fill(2, 500);
  EXPECT_EQ(pool.spare(), 2u);
  pool.fill(3, 500);
  EXPECT_EQ(pool.spare(), 3u);
  pool.fill(1, 500);
  EXPECT_EQ(pool.spare(), 3u);  // never shrinks
  for (int i = 0; i < 3; ++i) {
    std::vector<TokenProb> v = pool.take();
    EXPECT_TRUE(v.empty());
    EXPECT_GE(v.capacity(), 500u);
  }
}

TEST(DistributionPool, KeepsNoVectorWithoutStorage) {
  DistributionPool pool;
  std::vector<std::vector<TokenProb>> dists(2);
  pool.give_back(dists);
  EXPECT_EQ(pool.spare(), 0u);
}

}  // namespace
}  // namespace exactly
