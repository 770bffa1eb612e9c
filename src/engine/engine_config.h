// Knobs of the batched engine, shared by `run`, `batch` and `serve`.
#pragma once

#include <cstdint>
#include <string>

#include "speculative/acceptance_rule.h"

namespace exactly {

struct EngineConfig {
  int threads = 0;                         // 0: all hardware threads
  // Bytes for the KV pool (K and V, all layers). 0: the model's default —
  // 2 GiB on the CPU; on a GPU what gpu_memory_utilization of the device
  // leaves after the weights and the activation workspace.
  int64_t kv_cache_memory = 0;
  double gpu_memory_utilization = 0.9;
  int32_t block_size = 16;                 // token slots per KV block
  int64_t max_num_batched_tokens = 2048;   // tokens per forward pass
  int32_t max_num_seqs = 64;               // running sequences per step
  bool enable_prefix_caching = true;
  int64_t long_prefill_token_threshold = 0;  // >0: cap one request's tokens per step
  int32_t max_model_len = 0;               // 0: the model's context length
  // Speculative decoding: "" (off), "ngram" (prompt lookup), "draft:PATH"
  // (a draft model with the target's vocabulary), "layerskip:L" (the
  // target's first L layers draft) or "head:PATH" (a draft head reading the
  // target's hidden states, model/draft_head.h). At most num_speculative_tokens drafts per
  // request and step; the per-request acceptance history and the measured
  // step costs adapt k below that.
  std::string spec_method;
  int32_t num_speculative_tokens = 3;
  // false: every decoding request drafts num_speculative_tokens tokens each
  // step, whatever acceptance and step costs say (tests, fixed-k benchmarks).
  bool adaptive_speculation = true;
  // With adaptive speculation, a draft model's drafts for a request go on to
  // num_speculative_tokens while it is confident of them and end at the
  // first it is unsure of (draft_continuation_threshold); false: their
  // number is the one the acceptance rate gives (draft_length_for_cost).
  bool confident_draft_runs = true;
  // Bytes for the KV cache of a draft:PATH model or a head:PATH head, on top
  // of kv_cache_memory.
  // 0: the two share kv_cache_memory in proportion to their bytes per token,
  // so that both caches hold the same number of tokens — the draft then never
  // runs out of room before the target does, whatever the workload.
  int64_t draft_kv_cache_memory = 0;
  // How drafts are accepted: always modified rejection sampling, except in
  // the tests that show a wrong rule fails the engine's distribution test.
  AcceptanceRule acceptance_rule = kModifiedRejection;
};

}  // namespace exactly
