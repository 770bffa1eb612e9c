#include "engine/output_constraint.h"

#include <algorithm>
#include <chrono>
#include <cstdlib>
#include <limits>

namespace exactly {

void process_row(std::span<const float> logits, const LogitBias& bias, std::span<const uint32_t> mask,
                 std::vector<float>& out) {
  out.assign(logits.begin(), logits.end());
  for (const auto& [id, b] : bias) out[static_cast<size_t>(id)] += b;
  if (mask.empty()) return;
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  for (size_t t = 0; t < out.size(); ++t)
    if (((mask[t / 32] >> (t % 32)) & 1u) == 0) out[t] = kNegInf;
}

// EXACTLY_MASK_AFFINITY=0 lets any idle thread take any job (for comparisons).
MaskFiller::MaskFiller(int threads) : queues_(static_cast<size_t>(std::max(1, threads))) {
  if (const char* e = std::getenv("EXACTLY_MASK_AFFINITY")) steal_lone_jobs_ = std::atoi(e) == 0;
  for (size_t t = 0; t < queues_.size(); ++t) threads_.emplace_back([this, t] { run(t); });
}

MaskFiller::~MaskFiller() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  work_.notify_all();
  for (std::thread& t : threads_) t.join();
}

void MaskFiller::start(std::vector<Job> jobs) {
  if (jobs.empty()) return;
  std::unique_lock lock(mu_);
  done_.wait(lock, [this] { return idle(); });  // the previous step's jobs are done
  jobs_ = std::move(jobs);
  for (size_t i = 0; i < jobs_.size(); ++i) queues_[jobs_[i].key % queues_.size()].push_back(i);
  waiting_ = jobs_.size();
  lock.unlock();
  work_.notify_all();
}

void MaskFiller::wait() {
  std::unique_lock lock(mu_);
  if (idle()) return;
  const auto t0 = std::chrono::steady_clock::now();
  done_.wait(lock, [this] { return idle(); });
  times_.wait_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

MaskFiller::Times MaskFiller::times() {
  std::lock_guard lock(mu_);
  return times_;
}

std::optional<size_t> MaskFiller::take(size_t thread) {
  std::deque<size_t>* from = &queues_[thread];
  if (from->empty()) {
    for (std::deque<size_t>& q : queues_)
      if (q.size() > from->size()) from = &q;
    if (from->size() < (steal_lone_jobs_ ? 1u : 2u)) return std::nullopt;
    const size_t job = from->back();
    from->pop_back();
    return job;
  }
  const size_t job = from->front();
  from->pop_front();
  return job;
}

void MaskFiller::run(size_t thread) {
  std::unique_lock lock(mu_);
  while (true) {
    std::optional<size_t> job;
    work_.wait(lock, [&] { return quit_ || (job = take(thread)).has_value(); });
    if (quit_) return;
    --waiting_;
    ++running_;
    Job& mine = jobs_[*job];  // jobs_ is replaced only once every job is done
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    mine.run();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    --running_;
    ++times_.jobs;
    times_.job_seconds += seconds;
    if (idle()) done_.notify_all();
  }
}

}  // namespace exactly
