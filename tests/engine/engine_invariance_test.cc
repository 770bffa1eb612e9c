// Batch invariance of the engine on the real model: a request's tokens and
// logprobs are bit-identical whether it runs alone, among 63 other requests of
// mixed lengths, with a prefix-cache hit or miss, under any prefill chunk
// size, and after being preempted and recomputed.
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <map>

#include "engine/engine.h"
#include "real_model_test.h"
#include "sample/rng.h"

namespace exactly {
namespace {

struct Result {
  std::vector<int32_t> tokens;
  std::vector<double> logprobs;
  bool operator==(const Result&) const = default;
};

class EngineInvariance : public RealModelTest {
 protected:

  // A chat prompt followed by `extra` random tokens, so lengths vary.
  static std::vector<int32_t> prompt(uint64_t seed, int extra) {
    std::vector<int32_t> p = model_->tokenizer->encode(
        "<|im_start|>user\nTell me something about the number " + std::to_string(seed) + ".<|im_end|>\n", true);
    Rng rng(seed);
    for (int i = 0; i < extra; ++i) p.push_back(static_cast<int32_t>(3 + rng.next() % 49000));
    auto tail = model_->tokenizer->encode("<|im_start|>assistant\n", true);
    p.insert(p.end(), tail.begin(), tail.end());
    return p;
  }

  static RequestParams params(std::vector<int32_t> p, bool sampled, int64_t max_tokens) {
    RequestParams r;
    r.prompt = std::move(p);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;  // fixed lengths make the comparison complete
    r.logprobs = 1;
    r.sampling.temperature = sampled ? 1.0f : 0.0f;
    r.sampling.top_k = 0;
    r.sampling.top_p = 1.0f;
    r.sampling.min_p = 0.0f;
    r.sampling.seed = 7;
    return r;
  }

  // Runs the requests to completion and returns each one's result.
  static std::vector<Result> run(const std::vector<RequestParams>& reqs, EngineConfig config,
                                 EngineStats* stats = nullptr) {
    config.threads = 2;
    Engine engine(*model_, config);
    std::map<ClientRequestId, size_t> index;
    for (size_t i = 0; i < reqs.size(); ++i) index[engine.add_request(reqs[i])] = i;
    std::vector<Result> results(reqs.size());
    while (engine.has_unfinished()) {
      for (const RequestOutput& out : engine.step()) {
        Result& r = results[index.at(out.id)];
        for (const CompletionDelta& d : out.completions) {
          r.tokens.insert(r.tokens.end(), d.token_ids.begin(), d.token_ids.end());
          for (const auto& lp : d.logprobs) r.logprobs.push_back(lp.logprob);
        }
      }
      engine.check_integrity();
    }
    const KVCacheStats kv = engine.kv_stats();
    EXPECT_EQ(kv.used_blocks, 0) << "blocks leaked";
    if (stats) *stats = engine.stats();
    return results;
  }

};

TEST_F(EngineInvariance, AloneEqualsAmong63Others) {
  for (bool sampled : {false, true}) {
    const RequestParams target = params(prompt(1, 40), sampled, 24);
    const Result alone = run({target}, {}).front();
    ASSERT_EQ(alone.tokens.size(), 24u);
    std::vector<RequestParams> crowd;
    for (int i = 0; i < 63; ++i) crowd.push_back(params(prompt(100 + static_cast<uint64_t>(i), i * 5 % 150), i % 2, 8 + i % 17));
    crowd.insert(crowd.begin() + 20, target);
    EngineConfig config;
    config.max_num_batched_tokens = 512;
    const std::vector<Result> all = run(crowd, config);
    EXPECT_EQ(all[20], alone) << (sampled ? "seeded sampling" : "greedy");
  }
}

TEST_F(EngineInvariance, PrefillChunkSizeDoesNotMatter) {
  const RequestParams target = params(prompt(2, 90), true, 16);
  const Result unlimited = run({target}, {}).front();
  for (int64_t chunk : {1, 7, 64}) {
    EngineConfig config;
    config.long_prefill_token_threshold = chunk;
    EXPECT_EQ(run({target}, config).front(), unlimited) << "chunk " << chunk;
  }
}

TEST_F(EngineInvariance, PrefixCacheHitEqualsMiss) {
  const RequestParams target = params(prompt(3, 70), true, 16);
  const Result cold = run({target}, {}).front();
  // The first request warms the cache; the same prompt again hits it.
  EngineConfig config;
  config.threads = 2;
  Engine engine(*model_, config);
  for (int round = 0; round < 2; ++round) {
    ClientRequestId id = engine.add_request(target);
    Result r;
    int64_t cached = -1;
    while (engine.has_unfinished()) {
      for (const RequestOutput& out : engine.step()) {
        ASSERT_EQ(out.id, id);
        cached = out.cached_prompt_tokens;
        for (const CompletionDelta& d : out.completions) {
          r.tokens.insert(r.tokens.end(), d.token_ids.begin(), d.token_ids.end());
          for (const auto& lp : d.logprobs) r.logprobs.push_back(lp.logprob);
        }
      }
    }
    if (round == 1) {
      EXPECT_GT(cached, 0) << "second run should hit the prefix cache";
    }
    EXPECT_EQ(r, cold) << "round " << round;
  }
}

TEST_F(EngineInvariance, PreemptedAndRecomputedEqualsUninterrupted) {
  std::vector<RequestParams> reqs;
  for (int i = 0; i < 6; ++i) reqs.push_back(params(prompt(200 + static_cast<uint64_t>(i), 30), i % 2, 40));
  const std::vector<Result> roomy = run(reqs, {});
  EngineConfig tight;
  // About 3 requests' worth of blocks: the scheduler must preempt.
  tight.block_size = 16;
  tight.kv_cache_memory = 16 * 14 * int64_t{46080};
  tight.enable_prefix_caching = false;
  EngineStats stats;
  const std::vector<Result> squeezed = run(reqs, tight, &stats);
  EXPECT_GT(stats.preemptions, 0) << "the pool was meant to force preemptions";
  for (size_t i = 0; i < reqs.size(); ++i) EXPECT_EQ(squeezed[i], roomy[i]) << "request " << i;
}

}  // namespace
}  // namespace exactly
