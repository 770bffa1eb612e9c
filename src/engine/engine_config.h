// Knobs of the batched engine, shared by `run`, `batch` and `serve`.
#pragma once

#include <cstdint>
#include <string>

namespace exactly {

struct EngineConfig {
  int threads = 0;                         // 0: all hardware threads
  int64_t kv_cache_memory = int64_t{2} << 30;  // bytes for the KV pool (K and V, all layers)
  int32_t block_size = 16;                 // token slots per KV block
  int64_t max_num_batched_tokens = 2048;   // tokens per forward pass
  int32_t max_num_seqs = 64;               // running sequences per step
  bool enable_prefix_caching = true;
  int64_t long_prefill_token_threshold = 0;  // >0: cap one request's tokens per step
  int32_t max_model_len = 0;               // 0: the model's context length
  // Speculative decoding: "" (off) or "ngram" (prompt lookup). At most
  // num_speculative_tokens drafts per request and step; the per-request
  // acceptance history adapts k below that.
  std::string spec_method;
  int32_t num_speculative_tokens = 3;
};

}  // namespace exactly
