// Drives a Scheduler the way the engine will, with a simulated KV memory
// (which token each slot holds) instead of a model. Each step it checks what
// the scheduler promised: the budget, that every scheduled request reads back
// its own tokens through its block table (prefix hits and copies included;
// with a KV window, the positions its first new token reads), and then
// writes the new tokens' "KV". The token a request generates at
// output index k is a fixed function of (id, k), so the full output of a
// request is known in advance however often it is preempted.
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <set>
#include <vector>

#include "sched/scheduler.h"

namespace exactly::testing {

inline int32_t output_token(RequestId id, int64_t index) {
  return static_cast<int32_t>(1000 + (id * 7919 + index * 31) % 97);
}

class FakeEngine {
 public:
  FakeEngine(int32_t num_blocks, int32_t block_size, SchedulerConfig config, int32_t window = 0)
      : kv(num_blocks, block_size, config.enable_prefix_caching, window),
        scheduler(kv, config),
        memory_(static_cast<size_t>(num_blocks) * block_size, -1) {}

  KVCacheManager kv;
  Scheduler scheduler;
  std::vector<std::unique_ptr<Request>> finished;
  std::set<RequestId> stop_after;  // these requests emit a stop at their second output
  int32_t num_forks = 0;
  int64_t num_copies = 0;

  // A parallel sample of `parent`, which has just sampled its first token.
  void fork(RequestId parent, RequestId child) {
    scheduler.fork_request(parent, child, output_token(child, 0));
    ++num_forks;
    kv.check_integrity();
  }

  // One engine step; returns what the scheduler decided.
  SchedulerOutput step() {
    SchedulerOutput out = scheduler.schedule();
    check_output(out);
    const int32_t bs = kv.block_size();
    num_copies += static_cast<int64_t>(out.copies.size());
    for (const BlockCopy& c : out.copies) {
      std::copy_n(memory_.begin() + static_cast<ptrdiff_t>(c.src) * bs, bs,
                  memory_.begin() + static_cast<ptrdiff_t>(c.dst) * bs);
    }
    std::vector<StepTokens> sampled;
    for (const ScheduledChunk& chunk : out.scheduled) {
      const Request& r = *scheduler.find(chunk.id);
      std::span<const BlockId> table = kv.block_table(chunk.id);
      auto slot = [&](int64_t p) { return static_cast<size_t>(table[p / bs] * bs + p % bs); };
      const int32_t w = kv.window();
      for (int64_t p = w > 0 ? std::max<int64_t>(0, chunk.first_new_token - w + 1) : 0; p < chunk.first_new_token;
           ++p) {
        if (table[p / bs] == kNoBlock) {
          ADD_FAILURE() << "request " << r.id << " released position " << p << " of its window";
          continue;
        }
        EXPECT_EQ(memory_[slot(p)], r.tokens[p]) << "request " << r.id << " reads wrong KV at " << p;
      }
      for (int64_t p = chunk.first_new_token; p < chunk.first_new_token + chunk.num_new_tokens; ++p) {
        memory_[slot(p)] = p < r.num_tokens() ? r.tokens[p] : r.draft_tokens[p - r.num_tokens()];
      }
      if (chunk.samples) {
        const int64_t index = r.num_output_tokens();
        sampled.push_back({r.id, {output_token(r.id, index)}, stop_after.count(r.id) != 0 && index == 1});
      }
    }
    for (auto& done : scheduler.update_after_step(out, sampled)) finished.push_back(std::move(done));
    kv.check_integrity();
    return out;
  }

 private:
  void check_output(const SchedulerOutput& out) const {
    const SchedulerConfig& config = scheduler.config();
    int64_t total = 0;
    std::set<RequestId> ids;
    for (const ScheduledChunk& chunk : out.scheduled) {
      const Request* r = scheduler.find(chunk.id);
      ASSERT_NE(r, nullptr);
      EXPECT_EQ(r->status, RequestStatus::kRunning);
      EXPECT_TRUE(ids.insert(chunk.id).second) << "request " << chunk.id << " scheduled twice";
      EXPECT_GT(chunk.num_new_tokens, 0);
      EXPECT_EQ(chunk.first_new_token, r->num_computed_tokens);
      EXPECT_LE(chunk.first_new_token + chunk.num_new_tokens, r->num_tokens_with_drafts());
      EXPECT_EQ(chunk.samples, chunk.first_new_token + chunk.num_new_tokens == r->num_tokens_with_drafts());
      EXPECT_GE(kv.num_reserved_tokens(chunk.id), chunk.first_new_token + chunk.num_new_tokens);
      if (config.long_prefill_token_threshold > 0) {
        EXPECT_LE(chunk.num_new_tokens, config.long_prefill_token_threshold);
      }
      total += chunk.num_new_tokens;
    }
    EXPECT_EQ(total, out.num_batched_tokens);
    EXPECT_LE(total, config.max_num_batched_tokens) << "token budget exceeded";
    // Admission respects max_num_seqs; forks may add to it.
    EXPECT_LE(scheduler.num_running(), static_cast<size_t>(config.max_num_seqs + num_forks));
    for (RequestId id : out.preempted) {
      const Request* r = scheduler.find(id);
      ASSERT_NE(r, nullptr) << "a preempted request was lost";
      EXPECT_EQ(r->status, RequestStatus::kPreempted);
      EXPECT_EQ(r->num_computed_tokens, 0);
      EXPECT_FALSE(kv.contains(id));
      EXPECT_EQ(ids.count(id), 0u) << "request " << id << " both scheduled and preempted";
    }
  }

  std::vector<int32_t> memory_;  // [num_blocks, block_size] token whose KV each slot holds
};

inline std::vector<int32_t> expected_outputs(RequestId id, int64_t count) {
  std::vector<int32_t> out;
  for (int64_t k = 0; k < count; ++k) out.push_back(output_token(id, k));
  return out;
}

}  // namespace exactly::testing
