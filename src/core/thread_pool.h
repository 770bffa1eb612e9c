// A fork-join pool for the CPU kernels.
//
// The calling thread takes part as thread 0, so a pool of N threads starts
// N-1 workers. Work is split so that every output element is computed by one
// thread with no cross-thread reduction: results never depend on the number of
// threads or on how the work was divided (the engine's batch invariance relies
// on this).
#pragma once

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>
#include <vector>

namespace exactly {

class ThreadPool {
 public:
  explicit ThreadPool(int num_threads);
  ~ThreadPool();
  ThreadPool(const ThreadPool&) = delete;
  ThreadPool& operator=(const ThreadPool&) = delete;

  int size() const { return num_threads_; }

  // Runs fn(thread_index) once on every thread; returns when all have finished.
  void run_on_all(const std::function<void(int)>& fn);

  // Calls fn(begin, end) on disjoint chunks covering [0, n), each chunk a
  // multiple of `grain` items (except the last). Chunks are handed out
  // dynamically so a busy core does not stall the whole step.
  void parallel_for(int64_t n, int64_t grain, const std::function<void(int64_t, int64_t)>& fn);

  // Threads to use by default: the machine's hardware threads.
  static int default_threads();

 private:
  void worker_loop(int index);

  int num_threads_;
  std::vector<std::thread> workers_;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> generation_{0};
  std::atomic<int> pending_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace exactly
