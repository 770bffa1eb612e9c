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
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  for (auto& t : workers_) t.join();
}

int ThreadPool::default_threads() {
  unsigned n = std::thread::hardware_concurrency();
  return n == 0 ? 1 : static_cast<int>(n);
}

void ThreadPool::worker_loop(int index) {
  uint64_t seen = 0;
  for (;;) {
    uint64_t gen = generation_.load(std::memory_order_acquire);
    for (int spin = 0; gen == seen && spin < kSpinIterations; ++spin) {
      EXACTLY_PAUSE();
      gen = generation_.load(std::memory_order_acquire);
    }
    if (gen == seen) {
      generation_.wait(seen, std::memory_order_acquire);
      continue;
    }
    seen = gen;
    if (stop_.load(std::memory_order_acquire)) return;
    (*job_)(index);
    pending_.fetch_sub(1, std::memory_order_acq_rel);
  }
}

void ThreadPool::run_on_all(const std::function<void(int)>& fn) {
  if (num_threads_ == 1) {
    fn(0);
    return;
  }
  job_ = &fn;
  pending_.store(num_threads_ - 1, std::memory_order_release);
  generation_.fetch_add(1, std::memory_order_acq_rel);
  generation_.notify_all();
  fn(0);
  while (pending_.load(std::memory_order_acquire) != 0) EXACTLY_PAUSE();
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
