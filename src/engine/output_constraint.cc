#include "engine/output_constraint.h"

#include <algorithm>
#include <chrono>
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

MaskFiller::MaskFiller(int threads) {
  for (int t = 0; t < std::max(1, threads); ++t) threads_.emplace_back([this] { run(); });
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
  next_ = 0;
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

void MaskFiller::run() {
  std::unique_lock lock(mu_);
  while (true) {
    work_.wait(lock, [this] { return quit_ || next_ < jobs_.size(); });
    if (quit_) return;
    Job& job = jobs_[next_++];  // jobs_ is replaced only once every job is done
    ++running_;
    lock.unlock();
    const auto t0 = std::chrono::steady_clock::now();
    job();
    const double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
    lock.lock();
    --running_;
    ++times_.jobs;
    times_.job_seconds += seconds;
    if (idle()) done_.notify_all();
  }
}

}  // namespace exactly
