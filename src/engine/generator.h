// Single-sequence generation on the CPU model: keeps one context whose KV
// lives in a paged pool with an identity block table, feeds prompts in
// chunks, and samples continuations. The batched engine builds on the same
// model interface (ForwardBatch); this is the direct path used by
// `perplexity`, `logits` and `bench model` (`run` and `chat` go through the
// engine).
#pragma once

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "core/thread_pool.h"
#include "model/kv_storage.h"
#include "model/model.h"
#include "sample/sampler.h"

namespace exactly {

class Generator {
 public:
  static constexpr int kBlockSize = 16;

  // context_size: the most tokens this generator will hold (KV is sized for it).
  // max_chunk: tokens per forward pass when feeding a prompt.
  Generator(Model& model, ThreadPool& pool, int32_t context_size, int32_t max_chunk = 512);

  int32_t context_size() const { return context_size_; }
  int32_t size() const { return static_cast<int32_t>(tokens_.size()); }
  const std::vector<int32_t>& tokens() const { return tokens_; }
  int32_t vocab_size() const { return model_.config().vocab_size; }

  // Appends tokens, computes them, and returns the logits after the last one
  // (valid until the next call). Throws Error when the context would overflow.
  std::span<const float> feed(std::span<const int32_t> tokens);

  // Appends tokens and writes the logits of every one of them:
  // out: [tokens.size(), vocab_size].
  void feed_all(std::span<const int32_t> tokens, float* out);

  // Forgets the context (the KV pool is reused).
  void reset() { tokens_.clear(); }
  // Drops tokens after the first `n` (their KV is simply overwritten later).
  void truncate(int32_t n);

 private:
  void run_chunk(std::span<const int32_t> chunk, bool all_logits, float* out);

  Model& model_;
  ThreadPool& pool_;
  int32_t context_size_;
  int32_t max_chunk_;
  std::unique_ptr<KVPool> kv_;
  std::vector<int32_t> tokens_;
  std::vector<int32_t> block_table_;  // [num_blocks] identity: logical block i -> physical i
  std::vector<float> logits_;         // [vocab_size]
  ForwardBatch batch_;
};

enum class StopReason { kEndOfGeneration, kMaxTokens, kContextFull };

struct GenerationStats {
  int32_t prompt_tokens = 0;
  int32_t generated_tokens = 0;
  double prompt_seconds = 0;
  double generate_seconds = 0;
  StopReason stop = StopReason::kMaxTokens;
};

// Feeds `prompt` and samples up to max_tokens tokens, calling on_token for each
// (the end-of-generation token itself is not reported). is_end(id) decides stops.
GenerationStats generate(Generator& gen, Sampler& sampler, std::span<const int32_t> prompt,
                         int32_t max_tokens, const std::function<bool(int32_t)>& is_end,
                         const std::function<void(int32_t)>& on_token);

}  // namespace exactly
