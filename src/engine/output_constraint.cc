#include "engine/output_constraint.h"

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

MaskFiller::MaskFiller() : thread_([this] { run(); }) {}

MaskFiller::~MaskFiller() {
  {
    std::lock_guard lock(mu_);
    quit_ = true;
  }
  cv_.notify_all();
  thread_.join();
}

void MaskFiller::start(std::vector<Job> jobs) {
  if (jobs.empty()) return;
  {
    std::lock_guard lock(mu_);
    jobs_ = std::move(jobs);
    busy_ = true;
  }
  cv_.notify_all();
}

void MaskFiller::wait() {
  std::unique_lock lock(mu_);
  cv_.wait(lock, [this] { return !busy_; });
}

void MaskFiller::run() {
  std::unique_lock lock(mu_);
  while (true) {
    cv_.wait(lock, [this] { return busy_ || quit_; });
    if (quit_) return;
    std::vector<Job> jobs = std::move(jobs_);
    lock.unlock();
    for (Job& j : jobs) j();
    lock.lock();
    busy_ = false;
    cv_.notify_all();
  }
}

}  // namespace exactly
