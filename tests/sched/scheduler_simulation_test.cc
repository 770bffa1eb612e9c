// Thousands of steps of random arrivals, lengths, priorities and aborts over
// a pool small enough to force preemption, checked step by step by FakeEngine.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "fake_engine.h"

namespace exactly::testing {
namespace {

struct SimulationShape {
  int32_t num_blocks;
  int32_t block_size;
  int64_t budget;
  int32_t max_seqs;
  bool prefix_caching;
  int64_t long_prefill_token_threshold = 0;
  int32_t window = 0;  // the KV window; requests then grow past the pool
};

void simulate(uint32_t seed, SimulationShape shape) {
  std::mt19937 rng(seed);
  auto uniform = [&](int64_t lo, int64_t hi) {
    return lo + static_cast<int64_t>(rng() % static_cast<uint32_t>(hi - lo + 1));
  };
  SchedulerConfig config;
  config.max_num_batched_tokens = shape.budget;
  config.max_num_seqs = shape.max_seqs;
  config.enable_prefix_caching = shape.prefix_caching;
  config.long_prefill_token_threshold = shape.long_prefill_token_threshold;
  FakeEngine e(shape.num_blocks, shape.block_size, config, shape.window);
  const int64_t pool_tokens = static_cast<int64_t>(shape.num_blocks) * shape.block_size;
  const int64_t capacity = shape.window > 0 ? 3 * pool_tokens : pool_tokens;

  std::map<RequestId, int64_t> max_tokens;  // every request ever added
  std::set<RequestId> aborted;
  RequestId next_id = 0;
  int64_t preemptions = 0;
  const int kArrivalSteps = 1500;
  for (int step = 0; step < 20000 && (step < kArrivalSteps || e.scheduler.has_unfinished()); ++step) {
    if (step < kArrivalSteps && rng() % 3 == 0) {
      // Prompts share stems so prefix hits happen too.
      const int64_t len = uniform(1, capacity / 3);
      std::vector<int32_t> prompt;
      const int32_t stem = static_cast<int32_t>(rng() % 3);
      for (int64_t i = 0; i < len; ++i) {
        prompt.push_back(i < len / 2 ? stem * 100 + static_cast<int32_t>(i) : static_cast<int32_t>(rng() % 5));
      }
      const int64_t max_out = uniform(1, capacity / 3);
      const RequestId id = next_id++;
      max_tokens[id] = max_out;
      e.scheduler.add_request(make_request(id, std::move(prompt), max_out, static_cast<int32_t>(rng() % 3)));
    }
    if (next_id > 0 && rng() % 12 == 0) {
      // Mostly recent requests, which are likely still waiting or running.
      const RequestId victim = std::max<RequestId>(0, next_id - 1 - static_cast<RequestId>(rng() % 8));
      if (auto r = e.scheduler.abort_request(victim)) {
        aborted.insert(victim);
        e.kv.check_integrity();
      }
    }
    const SchedulerOutput out = e.step();
    preemptions += static_cast<int64_t>(out.preempted.size());
    // Parallel samples: fork some requests right after their first token.
    for (const ScheduledChunk& chunk : out.scheduled) {
      const Request* r = e.scheduler.find(chunk.id);
      if (r == nullptr || r->num_output_tokens() != 1 || r->num_computed_tokens != r->num_tokens() - 1) continue;
      if (rng() % 4 != 0) continue;
      const RequestId child = next_id++;
      max_tokens[child] = r->max_tokens;
      e.fork(chunk.id, child);
    }
    ASSERT_FALSE(::testing::Test::HasFailure()) << "seed " << seed << " step " << step;
  }
  ASSERT_FALSE(e.scheduler.has_unfinished()) << "requests never finished";
  EXPECT_EQ(e.kv.num_free_blocks(), shape.num_blocks) << "blocks leaked";
  EXPECT_EQ(e.kv.num_seqs(), 0u);
  EXPECT_EQ(e.finished.size() + aborted.size(), max_tokens.size()) << "a request was lost";
  for (const auto& r : e.finished) {
    EXPECT_EQ(r->status, RequestStatus::kFinishedLength);
    std::span<const int32_t> outs = r->outputs();
    ASSERT_EQ(std::vector<int32_t>(outs.begin(), outs.end()), expected_outputs(r->id, max_tokens.at(r->id)))
        << "request " << r->id;
  }
  EXPECT_GT(preemptions, 0) << "the pool never forced a preemption";
  EXPECT_GT(e.num_forks, 0);
  // One-token blocks are never partially filled, so never copied.
  if (shape.block_size > 1) {
    EXPECT_GT(e.num_copies, 0) << "forks never led to a copy-on-write";
  }
  if (shape.prefix_caching) {
    EXPECT_GT(e.kv.stats().prefix_hit_tokens, 0);
  }
}

TEST(SchedulerSimulation, RandomWorkloadsFinishExactlyAndLeakNothing) {
  for (uint32_t seed = 0; seed < 3; ++seed) {
    simulate(10 * seed + 1, {16, 4, 32, 8, true});
    simulate(10 * seed + 2, {12, 2, 16, 4, true});
    simulate(10 * seed + 3, {24, 4, 64, 16, false});
    simulate(10 * seed + 4, {10, 8, 128, 6, true});
    simulate(10 * seed + 5, {20, 4, 24, 8, true, 6});
  }
}

// Requests up to twice as long as the pool run through it, their oldest
// blocks released as they grow, with preemption and recompute.
TEST(SchedulerSimulation, AWindowLetsRequestsLongerThanThePoolFinishExactly) {
  for (uint32_t seed = 0; seed < 2; ++seed) {
    simulate(10 * seed + 6, {16, 4, 8, 8, true, 0, 12});
    simulate(10 * seed + 7, {12, 2, 6, 4, false, 0, 7});
    simulate(10 * seed + 8, {10, 1, 4, 6, true, 0, 5});
  }
}

}  // namespace
}  // namespace exactly::testing
