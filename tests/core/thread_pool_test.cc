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

// The caller always runs; a worker joins at most once per job, and never
// after the job has returned.
TEST(ThreadPool, RunOnAllRunsCallerAndEachWorkerAtMostOnce) {
  ThreadPool pool(4);
  std::atomic<int> after_return{0};
  std::atomic<bool> returned{false};
  for (int rep = 0; rep < 2000; ++rep) {
    std::vector<std::atomic<int>> seen(4);
    returned = false;
    pool.run_on_all([&](int i) {
      if (returned) after_return++;
      seen[static_cast<size_t>(i)]++;
    });
    returned = true;
    ASSERT_EQ(seen[0].load(), 1);
    for (auto& s : seen) ASSERT_LE(s.load(), 1);
  }
  EXPECT_EQ(after_return.load(), 0);
}

// With more threads than cores and a busy machine, dynamically claimed work is
// still all done exactly once.
TEST(ThreadPool, OversubscribedPoolStillCoversEverything) {
  ThreadPool pool(8);
  for (int rep = 0; rep < 500; ++rep) {
    std::vector<std::atomic<int>> hits(1000);
    pool.parallel_for(1000, 16, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) hits[static_cast<size_t>(i)]++;
    });
    for (auto& h : hits) ASSERT_EQ(h.load(), 1);
  }
}

}  // namespace
}  // namespace exactly
