// One generation request as the scheduler sees it: its tokens, how many of
// them have their KV in the cache, and where it stands. Sampling parameters,
// stop strings and detokenizer state belong to the engine (engine_state).
#pragma once

#include <cstdint>
#include <span>
#include <vector>

#include "kvcache/ids.h"

namespace exactly {

// A request's KV lives in the sequence of the same id.
using RequestId = SeqId;

enum class RequestStatus {
  kWaiting,          // never run yet
  kRunning,          // holds KV blocks, scheduled every step
  kPreempted,        // lost its blocks; waits to be recomputed
  kFinishedStopped,  // the engine saw a stop token or string
  kFinishedLength,   // reached max_tokens or the model's context length
  kFinishedAborted,  // cancelled by the client
};

bool is_finished(RequestStatus status);
const char* to_string(RequestStatus status);

struct Request {
  RequestId id = 0;
  std::vector<int32_t> tokens;  // [num_tokens] prompt, then generated tokens (appended by update_after_step)
  int64_t num_prompt_tokens = 0;
  int64_t max_tokens = 0;       // generated tokens after which the request finishes
  // Lower is more urgent (0 before 1), as in vLLM; equal priorities run in
  // arrival order.
  int32_t priority = 0;
  // A request that needs the logits of every prompt position (prompt
  // logprobs) computes its whole prompt, never taking cached blocks, in
  // chunks of at most max_chunk_tokens (0: no limit of its own).
  bool skip_prefix_cache = false;
  int64_t max_chunk_tokens = 0;

  // Proposed continuation awaiting verification (speculative decoding). They
  // are scheduled like known tokens (their KV is computed in the same pass)
  // but are not part of `tokens` until accepted.
  std::vector<int32_t> draft_tokens;  // [num_drafts]

  // Set by the scheduler.
  int64_t num_computed_tokens = 0;  // tokens[0, num_computed_tokens) have their KV cached
  RequestStatus status = RequestStatus::kWaiting;
  uint64_t arrival = 0;              // admission order, unique; breaks priority ties
  int32_t num_preemptions = 0;

  void* engine_state = nullptr;  // the engine's own per-request state; never touched here

  int64_t num_tokens() const { return static_cast<int64_t>(tokens.size()); }
  int64_t num_output_tokens() const { return num_tokens() - num_prompt_tokens; }
  // What scheduling aims to compute: known tokens plus drafts.
  int64_t num_tokens_with_drafts() const { return num_tokens() + static_cast<int64_t>(draft_tokens.size()); }
  std::span<const int32_t> prompt() const { return std::span<const int32_t>(tokens).first(num_prompt_tokens); }
  std::span<const int32_t> outputs() const { return std::span<const int32_t>(tokens).subspan(num_prompt_tokens); }
};

// A waiting request with `prompt` that may generate up to `max_tokens` tokens.
Request make_request(RequestId id, std::vector<int32_t> prompt, int64_t max_tokens, int32_t priority = 0);

}  // namespace exactly
