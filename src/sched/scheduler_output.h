// What one scheduling step decided, for the engine to pack into a ForwardBatch,
// and what the engine reports back after the forward pass.
#pragma once

#include <cstdint>
#include <vector>

#include "kvcache/kv_cache_manager.h"
#include "sched/request.h"

namespace exactly {

struct ScheduledChunk {
  RequestId id = 0;
  int64_t first_new_token = 0;  // num_computed_tokens before the step: position of the first token computed
  int64_t num_new_tokens = 0;   // tokens [first_new_token, first_new_token + num_new_tokens) are computed
  // The chunk reaches the end of the request's known tokens (and drafts), so
  // its last position's logits give the next token.
  bool samples = false;
};

struct SchedulerOutput {
  std::vector<ScheduledChunk> scheduled;  // [n_scheduled] batch order: running requests, then admitted ones
  std::vector<BlockCopy> copies;          // copy-on-write, to apply in order before the forward pass
  std::vector<RequestId> preempted;       // lost their blocks this step; back in the waiting queue
  int64_t num_batched_tokens = 0;         // sum of num_new_tokens
};

// The engine's verdict for one sampling chunk.
struct StepTokens {
  RequestId id = 0;
  // [n] new tokens: one sampled token, or with speculation the accepted
  // drafts followed by one more sampled token.
  std::vector<int32_t> tokens;
  bool stop = false;  // a stop token or string ends the request here
};

}  // namespace exactly
