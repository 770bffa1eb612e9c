// Continuous batching under one rule: each step, each scheduled request
// computes min(tokens not yet computed, budget left) tokens. A decode is one
// token, a long prompt is computed in chunks, a prefix-cache hit starts high,
// a speculative verify is 1 + drafts. Running requests go first, most urgent
// first; waiting requests are admitted after them by priority, then arrival,
// while the token budget, max_num_seqs and the KV blocks allow. When a
// running request cannot get a block, the least urgent running request (the
// newest within the lowest priority) is preempted: it loses its blocks and
// returns to the waiting queue to be recomputed, usually from the prefix cache.
//
// Per step the engine calls schedule(), runs the forward pass, then
// update_after_step() with the sampled tokens. Abort and finish only between
// steps. The scheduler owns unfinished requests; finished ones are handed
// back to the engine.
//
// Speculation hook: the engine may fill Request::draft_tokens before
// schedule(); drafts are scheduled like known tokens, and update_after_step()
// keeps the accepted ones (the leading StepTokens::tokens that equal the
// drafts) and rolls the KV back past the rejected ones.
#pragma once

#include <cstdint>
#include <memory>
#include <set>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvcache/kv_cache_manager.h"
#include "sched/request.h"
#include "sched/scheduler_output.h"

namespace exactly {

struct SchedulerConfig {
  int64_t max_num_batched_tokens = 2048;    // tokens per forward pass
  int32_t max_num_seqs = 64;                // running requests (forks may exceed it)
  bool enable_prefix_caching = true;        // look up waiting prompts in the prefix cache
  int64_t long_prefill_token_threshold = 0; // >0: no request computes more tokens than this per step
  int64_t max_model_len = 0;                // >0: a request finishes (length) when it has this many tokens
};

class Scheduler {
 public:
  Scheduler(KVCacheManager& kv, SchedulerConfig config);

  // Queues a new request. It must fit the KV cache alone (see fits_alone),
  // or it could never run.
  Request& add_request(Request request);
  // Whether a request that grows to `max_total_tokens` fits in the whole KV
  // cache (with a KV window, the blocks it holds at once in any step); the
  // engine rejects requests that do not.
  bool fits_alone(int64_t max_total_tokens) const;

  // Ends a request now (stopped, length or aborted) and frees its blocks;
  // returns it to the caller. Unknown or already finished ids give null.
  std::unique_ptr<Request> finish_request(RequestId id, RequestStatus reason);
  std::unique_ptr<Request> abort_request(RequestId id) { return finish_request(id, RequestStatus::kFinishedAborted); }

  // Parallel samples (n > 1): right after `parent` sampled its newest token,
  // `child` becomes a running copy sharing all its blocks, with its own
  // sample `child_token` in place of the parent's newest token. The child
  // ranks last within the parent's priority.
  Request& fork_request(RequestId parent, RequestId child, int32_t child_token);

  SchedulerOutput schedule();

  // After the forward pass: advances num_computed_tokens, appends the engine's
  // tokens for sampling chunks (every still-running sampling chunk needs an
  // entry), commits newly full blocks to the prefix cache, finishes requests
  // that stopped or reached their length and returns them.
  std::vector<std::unique_ptr<Request>> update_after_step(const SchedulerOutput& output,
                                                          std::span<const StepTokens> sampled);

  Request* find(RequestId id);
  const Request* find(RequestId id) const;
  size_t num_waiting() const { return waiting_.size(); }
  size_t num_running() const { return running_.size(); }
  bool has_unfinished() const { return !requests_.empty(); }
  const SchedulerConfig& config() const { return config_; }

 private:
  // Most urgent first: lower priority value, then earlier arrival.
  struct MoreUrgent {
    bool operator()(const Request* a, const Request* b) const;
  };

  int64_t chunk_size(const Request& r, int64_t budget) const;
  bool schedule_running(Request& r, int64_t& budget, SchedulerOutput& out);
  bool admit_waiting(Request& r, int64_t& budget, SchedulerOutput& out);
  void preempt(Request& r, SchedulerOutput& out);
  void insert_running(Request* r);
  void remove_running(Request* r);
  void apply_tokens(Request& r, const ScheduledChunk& chunk, const StepTokens& step);
  bool reached_length(const Request& r) const;

  KVCacheManager& kv_;
  SchedulerConfig config_;
  uint64_t next_arrival_ = 0;
  std::unordered_map<RequestId, std::unique_ptr<Request>> requests_;  // every unfinished request
  std::vector<Request*> running_;                                     // [n_running] most urgent first
  std::set<Request*, MoreUrgent> waiting_;                            // most urgent first
};

}  // namespace exactly
