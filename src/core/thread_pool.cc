#include "core/thread_pool.h"

#include <algorithm>

#include "core/check.h"

#if defined(__x86_64__)
#include <immintrin.h>
#define EXACTLY_PAUSE() _mm_pause()
#else
#define EXACTLY_PAUSE() std::this_thread::yield()
#endif

namespace exactly {

namespace {
// Spin this many times before sleeping: a decode step issues a few hundred
// parallel regions, and waking a sleeping thread costs more than one of them.
constexpr int kSpinIterations = 1 << 16;
}  // namespace

ThreadPool::ThreadPool(int num_threads) : num_threads_(std::max(1, num_threads)) {
  for (int i = 1; i < num_threads_; ++i) workers_.emplace_back([this, i] { worker_loop(i); });
}

ThreadPool::~ThreadPool() {
  stop_.store(true, std::memory_order_release);
  state_.fetch_add(uint64_t{1} << 32, std::memory_order_acq_rel);
  state_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen_generation = 0;
  for (;;) {
    uint64_t s = state_.load(std::memory_order_acquire);
    for (int spin = 0; (s >> 32) == seen_generation && spin < kSpinIterations; ++spin) {
      EXACTLY_PAUSE();
      s = state_.load(std::memory_order_acquire);
    }
    if ((s >> 32) == seen_generation) {
      state_.wait(s, std::memory_order_acquire);
      continue;
    }
    if (stop_.load(std::memory_order_acquire)) return;
    seen_generation = s >> 32;
    // Join only the job we saw, and only while it is open.
    bool joined = false;
    while ((s >> 32) == seen_generation && (s & kOpen)) {
      if (state_.compare_exchange_weak(s, s + 1, std::memory_order_acq_rel, std::memory_order_acquire)) {
        joined = true;
        break;
      }
    }
    if (!joined) continue;
    (*job_)(index);
    state_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  const uint64_t generation = (state_.load(std::memory_order_relaxed) >> 32) + 1;
  state_.store(generation << 32 | kOpen, std::memory_order_release);
  state_.notify_all();
  fn(0);
  // Close the job: workers that have not joined yet skip it.
  uint64_t s = state_.fetch_and(~kOpen, std::memory_order_acq_rel) & ~kOpen;
  while ((s & kActiveMask) != 0) {
    EXACTLY_PAUSE();
    s = state_.load(std::memory_order_acquire);
  }
  job_ = nullptr;
}

void ThreadPool::parallel_for(int64_t n, int64_t grain,
                              const std::function<void(int64_t, int64_t)>& fn) {
  EXACTLY_CHECK(grain > 0, "grain must be positive");
  if (n <= 0) return;
  int64_t units = (n + grain - 1) / grain;
  if (num_threads_ == 1 || units == 1) {
    fn(0, n);
    return;
  }
  // About four chunks per thread balances load without much contention.
  int64_t units_per_chunk = std::max<int64_t>(1, units / (4 * num_threads_));
  int64_t chunk = units_per_chunk * grain;
  std::atomic<int64_t> next{0};
  run_on_all([&](int) {
    for (;;) {
      int64_t begin = next.fetch_add(chunk, std::memory_order_relaxed);
      if (begin >= n) break;
      fn(begin, std::min(n, begin + chunk));
    }
  });
}

}  // namespace exactly
