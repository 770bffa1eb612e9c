// Times verify steps straight on the model (`exactly bench spec-cost`):
// sequences with their own blocks and a filled context, and steps of 1 + k
// tokens per sequence over them (the last accepted token and k drafts, at
// the next positions), each row's argmax wanted, as a greedy verify step
// asks. k = 0 is a plain decode step.
#pragma once

#include <cstdint>
#include <memory>
#include <vector>

#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "model/forward_batch.h"
#include "sample/rng.h"

namespace exactly::bench_tools {

class VerifyStepTimer {
 public:
  static constexpr int32_t kBlockSize = 16;

  // Fills `context` tokens of KV for each of `max_batch` sequences, with room
  // for up to `max_drafts` drafts after them.
  VerifyStepTimer(LoadedModel& m, int max_batch, int context, int max_drafts);

  // Milliseconds of one step of 1 + k tokens for each of the first `batch`
  // sequences: the whole forward call (the step's device work and its copies
  // back), median of `reps` after two warm-ups.
  double step_ms(int batch, int k, int reps);

 private:
  std::vector<int32_t> table(int s) const;
  int32_t random_token() { return static_cast<int32_t>(rng_.next() % static_cast<uint64_t>(vocab_)); }
  void fill_context(int s);
  void build_step(int batch, int k);
  double run();

  LoadedModel& m_;
  int context_, blocks_per_seq_;
  int32_t vocab_;
  Rng rng_;
  ThreadPool pool_{ThreadPool::default_threads()};
  std::unique_ptr<KVPool> kv_;
  ForwardBatch batch_;
  std::vector<float> logits_;    // [max_batch * (max_drafts + 1), vocab]
  std::vector<int32_t> tokens_;  // [max_batch * (max_drafts + 1)]
};

}  // namespace exactly::bench_tools
