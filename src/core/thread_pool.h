// A fork-join pool for the CPU kernels.
//
// The calling thread takes part as thread 0, so a pool of N threads starts
// N-1 workers. Work is split so that every output element is computed by one
// thread with no cross-thread reduction: results never depend on the number of
// threads or on how the work was divided (the engine's batch invariance relies
// on this).
//
// Participation is opportunistic: a worker that has not joined a job by the
// time the caller has finished it is not waited for. On a busy machine a
// descheduled worker would otherwise stall every one of the few hundred
// parallel regions of a decode step by a whole scheduler time slice. Jobs
// therefore hand out their work dynamically: each participant claims items
// until none are left.
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

  // Runs fn(thread_index) on the caller (index 0) and on each worker that
  // joins in time (at most once per index); returns when every participant
  // has finished. fn must claim its work dynamically, since a late worker may
  // not run at all.
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
  // state_ packs the job generation (high 32 bits), whether the job is still
  // open to new participants (bit 31) and how many workers are inside it
  // (low bits). Joining is a CAS on the whole word, so a worker can only join
  // the job it saw, and only while it is open.
  static constexpr uint64_t kOpen = uint64_t{1} << 31;
  static constexpr uint64_t kActiveMask = kOpen - 1;
  const std::function<void(int)>* job_ = nullptr;
  std::atomic<uint64_t> state_{0};
  std::atomic<bool> stop_{false};
};

}  // namespace exactly
