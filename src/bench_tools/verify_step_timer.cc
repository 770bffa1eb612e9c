#include "bench_tools/verify_step_timer.h"

#include <algorithm>

#include "bench_tools/timing.h"

namespace exactly::bench_tools {

VerifyStepTimer::VerifyStepTimer(LoadedModel& m, int max_batch, int context, int max_drafts)
    : m_(m), context_(context), blocks_per_seq_((context + max_drafts + 1 + kBlockSize - 1) / kBlockSize),
      vocab_(m.config().vocab_size), rng_(1234) {
  const int64_t max_rows = int64_t{max_batch} * (max_drafts + 1);
  m.model->reserve({std::max<int64_t>(max_rows, context), max_batch, context + max_drafts + 1, kBlockSize});
  kv_ = m.model->make_kv_pool(int64_t{max_batch} * blocks_per_seq_ + 1, kBlockSize);
  logits_.resize(static_cast<size_t>(max_rows * vocab_));
  tokens_.resize(static_cast<size_t>(max_rows));
  for (int s = 0; s < max_batch; ++s) fill_context(s);
}

double VerifyStepTimer::step_ms(int batch, int k, int reps) {
  build_step(batch, k);
  for (int i = 0; i < 2; ++i) run();
  std::vector<double> ms;
  for (int r = 0; r < reps; ++r) ms.push_back(run());
  return median(ms);
}

std::vector<int32_t> VerifyStepTimer::table(int s) const {
  std::vector<int32_t> t(static_cast<size_t>(blocks_per_seq_));
  for (int i = 0; i < blocks_per_seq_; ++i) t[static_cast<size_t>(i)] = 1 + s * blocks_per_seq_ + i;
  return t;
}

void VerifyStepTimer::fill_context(int s) {
  const std::vector<int32_t> t = table(s);
  batch_.reset(1, t.size());
  batch_.input.begin_sequence(0, t);
  for (int p = 0; p < context_; ++p) batch_.input.push_token(random_token(), p, t, kBlockSize);
  batch_.input.end_sequence(context_);
  batch_.input.logits_rows = {context_ - 1};
  batch_.jobs.row_use = {RowUse::kArgmax};
  m_.model->forward(batch_, *kv_, logits_.data(), pool_, -1, tokens_.data());
}

void VerifyStepTimer::build_step(int batch, int k) {
  batch_.reset(static_cast<size_t>(batch), static_cast<size_t>(blocks_per_seq_));
  for (int s = 0; s < batch; ++s) {
    const std::vector<int32_t> t = table(s);
    batch_.input.begin_sequence(static_cast<size_t>(s), t);
    for (int j = 0; j <= k; ++j) {
      batch_.input.logits_rows.push_back(static_cast<int32_t>(batch_.input.tokens.size()));
      batch_.jobs.row_use.push_back(RowUse::kArgmax);
      batch_.input.push_token(random_token(), context_ + j, t, kBlockSize);
    }
    batch_.input.end_sequence(context_ + k + 1);
  }
}

double VerifyStepTimer::run() {
  const auto t0 = Clock::now();
  m_.model->forward(batch_, *kv_, logits_.data(), pool_, -1, tokens_.data());
  return ms_between(t0, Clock::now());
}

}  // namespace exactly::bench_tools
