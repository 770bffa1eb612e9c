#include "core/thread_pool.h"

#include <gtest/gtest.h>

#include <atomic>
#include <vector>

namespace exactly {
namespace {

TEST(ThreadPool, ParallelForCoversEveryIndexOnce) {
  for (int threads : {1, 2, 3}) {
    ThreadPool pool(threads);
    for (int64_t n : {0, 1, 7, 64, 1000, 4097}) {
      for (int64_t grain : {1, 8, 32}) {
        std::vector<std::atomic<int>> hits(static_cast<size_t>(n));
        pool.parallel_for(n, grain, [&](int64_t b, int64_t e) {
          EXPECT_EQ(b % grain, 0);
          for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
        });
        for (int64_t i = 0; i < n; ++i) ASSERT_EQ(hits[static_cast<size_t>(i)].load(), 1) << i;
      }
    }
  }
}

TEST(ThreadPool, RunOnAllRunsEachThreadIndexOnce) {
  ThreadPool pool(4);
  for (int rep = 0; rep < 200; ++rep) {
    std::vector<std::atomic<int>> seen(4);
    pool.run_on_all([&](int i) { seen[static_cast<size_t>(i)]++; });
    for (auto& s : seen) ASSERT_EQ(s.load(), 1);
  }
}

}  // namespace
}  // namespace exactly
