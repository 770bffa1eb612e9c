#include "engine/generator.h"

#include <algorithm>
#include <chrono>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"

namespace exactly {

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

Generator::Generator(Model& model, ThreadPool& pool, int32_t context_size, int32_t max_chunk)
    : model_(model), pool_(pool), context_size_(context_size), max_chunk_(std::max(1, max_chunk)),
      kv_(model.make_kv_pool((context_size + kBlockSize - 1) / kBlockSize, kBlockSize)),
      logits_(static_cast<size_t>(model.config().vocab_size)) {
  EXACTLY_CHECK(context_size > 0);
  block_table_.resize(static_cast<size_t>(kv_->num_blocks()));
  for (size_t i = 0; i < block_table_.size(); ++i) block_table_[i] = static_cast<int32_t>(i);
}

void Generator::truncate(int32_t n) {
  if (n < size()) tokens_.resize(static_cast<size_t>(std::max(0, n)));
}

void Generator::run_chunk(std::span<const int32_t> chunk, bool all_logits, float* out) {
  const auto n = static_cast<int32_t>(chunk.size());
  const int32_t start = size();
  ForwardBatch& b = batch_;
  b.input.tokens.assign(chunk.begin(), chunk.end());
  b.input.positions.resize(static_cast<size_t>(n));
  b.input.slot_mapping.resize(static_cast<size_t>(n));
  for (int32_t i = 0; i < n; ++i) {
    b.input.positions[static_cast<size_t>(i)] = start + i;
    b.input.slot_mapping[static_cast<size_t>(i)] = start + i;  // identity block table
  }
  b.input.query_start = {0, n};
  b.input.seq_lens = {start + n};
  b.input.block_tables = block_table_;
  b.input.max_blocks_per_seq = static_cast<int32_t>(block_table_.size());
  b.input.logits_rows.clear();
  if (all_logits) {
    for (int32_t i = 0; i < n; ++i) b.input.logits_rows.push_back(i);
  } else {
    b.input.logits_rows.push_back(n - 1);
  }
  model_.forward(b, *kv_, out, pool_);
  tokens_.insert(tokens_.end(), chunk.begin(), chunk.end());
}

std::span<const float> Generator::feed(std::span<const int32_t> tokens) {
  EXACTLY_CHECK(!tokens.empty());
  if (size() + static_cast<int64_t>(tokens.size()) > context_size_)
    throw Error(strformat("%d tokens do not fit in the context: %d already used of %d", static_cast<int>(tokens.size()),
                          size(), context_size_));
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(max_chunk_)) {
    auto chunk = tokens.subspan(i, std::min(tokens.size() - i, static_cast<size_t>(max_chunk_)));
    run_chunk(chunk, false, logits_.data());
  }
  return logits_;
}

void Generator::feed_all(std::span<const int32_t> tokens, float* out) {
  if (size() + static_cast<int64_t>(tokens.size()) > context_size_)
    throw Error(strformat("%d tokens do not fit in the context: %d already used of %d", static_cast<int>(tokens.size()),
                          size(), context_size_));
  const int64_t vocab = vocab_size();
  for (size_t i = 0; i < tokens.size(); i += static_cast<size_t>(max_chunk_)) {
    auto chunk = tokens.subspan(i, std::min(tokens.size() - i, static_cast<size_t>(max_chunk_)));
    run_chunk(chunk, true, out + static_cast<int64_t>(i) * vocab);
  }
}

GenerationStats generate(Generator& gen, Sampler& sampler, std::span<const int32_t> prompt,
                         int32_t max_tokens, const std::function<bool(int32_t)>& is_end,
                         const std::function<void(int32_t)>& on_token) {
  GenerationStats s;
  s.prompt_tokens = static_cast<int32_t>(prompt.size());
  const size_t prompt_size = static_cast<size_t>(gen.size()) + prompt.size();
  auto t0 = std::chrono::steady_clock::now();
  std::span<const float> logits = gen.feed(prompt);
  s.prompt_seconds = seconds_since(t0);
  t0 = std::chrono::steady_clock::now();
  while (s.generated_tokens < max_tokens) {
    int32_t next = sampler.sample(logits, gen.tokens(), prompt_size);
    if (is_end(next)) {
      s.stop = StopReason::kEndOfGeneration;
      break;
    }
    on_token(next);
    ++s.generated_tokens;
    if (s.generated_tokens == max_tokens) break;
    if (gen.size() >= gen.context_size()) {
      s.stop = StopReason::kContextFull;
      break;
    }
    logits = gen.feed(std::span<const int32_t>(&next, 1));
  }
  s.generate_seconds = seconds_since(t0);
  return s;
}

}  // namespace exactly
