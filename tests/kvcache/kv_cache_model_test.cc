// The manager against the simulated memory of kv_cache_harness.h: every
// operation sequence of length <= 4 over tiny pools, then long random runs.
#include <gtest/gtest.h>

#include <random>

#include "kv_cache_harness.h"

namespace exactly::testing {
namespace {

// Applies operation `op` (one of kNumOps) to the harness. Operations name
// sequences by age (oldest / newest) so a sequence of op codes is meaningful
// whatever ids the earlier ones produced.
constexpr int kNumOps = 11;
void apply_op(KvHarness& h, int op) {
  const std::vector<int32_t> a = {1, 2, 3, 4, 5};
  const std::vector<int32_t> b = {1, 2, 3, 4, 9};
  const bool any = !h.seqs.empty();
  const SeqId oldest = any ? h.seqs.begin()->first : -1;
  const SeqId newest = any ? h.seqs.rbegin()->first : -1;
  switch (op) {
    case 0: h.start(a, 5); break;
    case 1: h.start(b, 5); break;
    case 2: h.start(a, 2); break;
    case 3:  // one more token: the rest of the prompt, or a decode
      if (any) {
        const auto& s = h.seqs.at(newest);
        const bool all_written = s.written == static_cast<int64_t>(s.tokens.size());
        h.extend(newest, 1, all_written ? std::vector<int32_t>{7} : std::vector<int32_t>{});
      }
      break;
    case 4: if (any) h.extend(oldest, 3, {6, 6, 6}); break;
    case 5: for (auto& [id, s] : h.seqs) h.commit(id); break;
    case 6: if (any) h.fork(newest); break;
    case 7: if (any) h.truncate(oldest, h.seqs.at(oldest).written / 2); break;
    case 8: if (any) h.free(oldest); break;
    case 9: if (any) h.free(newest); break;
    case 10: if (any) h.truncate(newest, std::max<int64_t>(0, h.seqs.at(newest).written - 1)); break;
  }
}

struct PoolShape {
  int32_t num_blocks;
  int32_t block_size;
  int32_t window = 0;
};

TEST(KVCacheModel, EveryOperationSequenceUpToFour) {
  for (PoolShape shape : {PoolShape{4, 2}, PoolShape{6, 1}, PoolShape{5, 3}, PoolShape{3, 4}, PoolShape{4, 1, 2},
                          PoolShape{4, 2, 3}, PoolShape{3, 2, 4}}) {
    for (int length = 1; length <= 4; ++length) {
      int total = 1;
      for (int i = 0; i < length; ++i) total *= kNumOps;
      for (int code = 0; code < total; ++code) {
        KvHarness h(shape.num_blocks, shape.block_size, true, shape.window);
        int rest = code;
        for (int i = 0; i < length; ++i) {
          apply_op(h, rest % kNumOps);
          rest /= kNumOps;
          h.verify();
          ASSERT_FALSE(::testing::Test::HasFailure())
              << "blocks " << shape.num_blocks << " x " << shape.block_size << ", window " << shape.window
              << ", ops code " << code << " step " << i;
        }
        h.free_all_and_check_empty();
        ASSERT_FALSE(::testing::Test::HasFailure()) << "ops code " << code;
      }
    }
  }
}

// Prompts drawn from a few shared stems over a tiny vocabulary, so prefix
// hits, duplicates and evictions are all frequent.
std::vector<int32_t> random_prompt(std::mt19937& rng) {
  static const std::vector<std::vector<int32_t>> stems = {
      {1, 2, 3, 4, 5, 6, 7, 8, 9, 10}, {1, 2, 3, 4, 0, 0, 0, 0}, {5, 5, 5, 5, 5, 5, 5, 5, 5}};
  const auto& stem = stems[rng() % stems.size()];
  std::vector<int32_t> prompt(stem.begin(), stem.begin() + static_cast<ptrdiff_t>(rng() % (stem.size() + 1)));
  const size_t tail = rng() % 4;
  for (size_t i = 0; i < tail || prompt.empty(); ++i) prompt.push_back(static_cast<int32_t>(rng() % 3));
  return prompt;
}

void random_run(uint32_t seed, int32_t num_blocks, int32_t block_size, bool prefix_caching, int steps,
                int32_t window = 0) {
  std::mt19937 rng(seed);  // 32-bit outputs held in a wider result_type
  KvHarness h(num_blocks, block_size, prefix_caching, window);
  int64_t allocations_refused = 0;
  for (int step = 0; step < steps; ++step) {
    const uint32_t dice = static_cast<uint32_t>(rng() % 100);
    const bool any = !h.seqs.empty();
    auto pick = [&] {
      auto it = h.seqs.begin();
      std::advance(it, static_cast<ptrdiff_t>(rng() % h.seqs.size()));
      return it->first;
    };
    if (dice < 22 || !any) {
      if (h.start(random_prompt(rng), 1 + rng() % 8) < 0) ++allocations_refused;
    } else if (dice < 55) {
      const SeqId id = pick();
      const auto& s = h.seqs.at(id);
      std::vector<int32_t> more;
      if (s.written == static_cast<int64_t>(s.tokens.size())) {
        for (uint32_t k = 0; k <= rng() % 3; ++k) more.push_back(static_cast<int32_t>(rng() % 3));
      }
      if (!h.extend(id, 1 + rng() % 5, more)) ++allocations_refused;
    } else if (dice < 72) {
      h.commit(pick());
    } else if (dice < 80) {
      h.fork(pick());
    } else if (dice < 87) {
      const SeqId id = pick();
      h.truncate(id, static_cast<int64_t>(rng() % (h.seqs.at(id).written + 1)));
    } else {
      h.free(pick());
    }
    h.verify();
    ASSERT_FALSE(::testing::Test::HasFailure()) << "seed " << seed << " step " << step;
  }
  h.free_all_and_check_empty();
  // The runs are meant to hit the interesting paths; make sure they did.
  EXPECT_GT(allocations_refused, 0) << "the pool never ran out";
  if (block_size > 1) {
    // One-token blocks are never partially filled, so never copied.
    EXPECT_GT(h.num_copies, 0) << "no copy-on-write happened";
  }
  if (prefix_caching) {
    EXPECT_GT(h.kv.stats().prefix_hit_tokens, 0) << "no prefix hit happened";
  }
  if (prefix_caching && window > 0) {
    EXPECT_GT(h.num_hits_past_the_window, 0) << "no prefix hit reached past its window";
  }
}

TEST(KVCacheModel, RandomOperationsAgainstSimulatedMemory) {
  for (uint32_t seed = 1; seed <= 6; ++seed) random_run(seed, 12, 2, true, 3000);
  for (uint32_t seed = 7; seed <= 9; ++seed) random_run(seed, 20, 4, true, 3000);
  for (uint32_t seed = 10; seed <= 11; ++seed) random_run(seed, 9, 1, true, 3000);
  random_run(12, 12, 2, false, 3000);
}

// With a window the sequences release their oldest blocks as they grow, and
// prefix hits must still read only blocks holding their own tokens.
TEST(KVCacheModel, RandomOperationsWithAWindow) {
  for (uint32_t seed = 21; seed <= 23; ++seed) random_run(seed, 12, 2, true, 3000, 5);
  random_run(24, 20, 4, true, 3000, 5);
  random_run(25, 9, 1, true, 3000, 3);
  random_run(26, 12, 2, false, 3000, 4);
}

}  // namespace
}  // namespace exactly::testing
