#include "sched/scheduler.h"

#include <gtest/gtest.h>

#include <numeric>

#include "fake_engine.h"

namespace exactly::testing {
namespace {

std::vector<int32_t> prompt_of(int64_t length, int32_t first = 1) {
  std::vector<int32_t> p(static_cast<size_t>(length));
  std::iota(p.begin(), p.end(), first);
  return p;
}

SchedulerConfig config(int64_t budget, int32_t max_seqs, bool prefix_caching = true) {
  SchedulerConfig c;
  c.max_num_batched_tokens = budget;
  c.max_num_seqs = max_seqs;
  c.enable_prefix_caching = prefix_caching;
  return c;
}

TEST(Scheduler, ChunksALongPromptAcrossSteps) {
  FakeEngine e(16, 4, config(4, 4));
  e.scheduler.add_request(make_request(7, prompt_of(10), 2));
  struct Expect {
    int64_t first, n;
    bool samples;
  };
  for (Expect x : {Expect{0, 4, false}, Expect{4, 4, false}, Expect{8, 2, true}, Expect{10, 1, true}}) {
    const SchedulerOutput out = e.step();
    ASSERT_EQ(out.scheduled.size(), 1u);
    EXPECT_EQ(out.scheduled[0].first_new_token, x.first);
    EXPECT_EQ(out.scheduled[0].num_new_tokens, x.n);
    EXPECT_EQ(out.scheduled[0].samples, x.samples);
  }
  ASSERT_EQ(e.finished.size(), 1u);
  EXPECT_EQ(e.finished[0]->status, RequestStatus::kFinishedLength);
  std::span<const int32_t> outs = e.finished[0]->outputs();
  EXPECT_EQ(std::vector<int32_t>(outs.begin(), outs.end()), expected_outputs(7, 2));
  EXPECT_EQ(e.kv.num_free_blocks(), 16);
}

TEST(Scheduler, DecodesGoBeforeNewPrefillsAndTheBudgetHolds) {
  FakeEngine e(64, 4, config(8, 8));
  e.scheduler.add_request(make_request(1, prompt_of(3), 10));
  e.scheduler.add_request(make_request(2, prompt_of(3, 50), 10));
  e.step();  // both prompts
  e.scheduler.add_request(make_request(3, prompt_of(20, 100), 10));
  const SchedulerOutput out = e.step();
  ASSERT_EQ(out.scheduled.size(), 3u);
  EXPECT_EQ(out.scheduled[0].id, 1);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);
  EXPECT_EQ(out.scheduled[1].id, 2);
  EXPECT_EQ(out.scheduled[1].num_new_tokens, 1);
  EXPECT_EQ(out.scheduled[2].id, 3);
  EXPECT_EQ(out.scheduled[2].num_new_tokens, 6) << "the prefill takes what the decodes left";
  EXPECT_FALSE(out.scheduled[2].samples);
  EXPECT_EQ(out.num_batched_tokens, 8);
}

TEST(Scheduler, RespectsMaxNumSeqs) {
  FakeEngine e(64, 4, config(100, 2));
  for (RequestId id = 0; id < 5; ++id) e.scheduler.add_request(make_request(id, prompt_of(3), 3));
  const SchedulerOutput out = e.step();
  EXPECT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(e.scheduler.num_running(), 2u);
  EXPECT_EQ(e.scheduler.num_waiting(), 3u);
  while (e.scheduler.has_unfinished()) e.step();
  EXPECT_EQ(e.finished.size(), 5u);
}

TEST(Scheduler, LongPrefillThresholdCapsAChunk) {
  SchedulerConfig c = config(100, 4);
  c.long_prefill_token_threshold = 5;
  FakeEngine e(64, 4, c);
  e.scheduler.add_request(make_request(0, prompt_of(12), 1));
  EXPECT_EQ(e.step().scheduled[0].num_new_tokens, 5);
  EXPECT_EQ(e.step().scheduled[0].num_new_tokens, 5);
  EXPECT_EQ(e.step().scheduled[0].num_new_tokens, 2);
}

TEST(Scheduler, PreemptsTheNewestAndItStillCompletes) {
  // 6 blocks of 2 tokens. Three requests with 3-token prompts take 2 blocks
  // each; their first decode (position 3) still fits, the second (position
  // 4) needs a third block.
  FakeEngine e(6, 2, config(100, 8, false));
  for (RequestId id = 0; id < 3; ++id) {
    e.scheduler.add_request(make_request(id, prompt_of(3, 10 * static_cast<int32_t>(id)), 4));
  }
  SchedulerOutput out = e.step();
  ASSERT_EQ(out.scheduled.size(), 3u);
  EXPECT_EQ(e.kv.num_free_blocks(), 0);
  out = e.step();
  EXPECT_EQ(out.scheduled.size(), 3u);
  EXPECT_TRUE(out.preempted.empty());
  out = e.step();
  ASSERT_EQ(out.preempted, std::vector<RequestId>{2});
  EXPECT_EQ(e.scheduler.find(2)->status, RequestStatus::kPreempted);
  EXPECT_EQ(e.scheduler.find(2)->num_preemptions, 1);
  // The freed blocks let both older requests grow.
  ASSERT_EQ(out.scheduled.size(), 2u);
  EXPECT_EQ(out.scheduled[0].id, 0);
  EXPECT_EQ(out.scheduled[1].id, 1);
  while (e.scheduler.has_unfinished()) e.step();
  ASSERT_EQ(e.finished.size(), 3u);
  for (const auto& r : e.finished) {
    EXPECT_EQ(r->status, RequestStatus::kFinishedLength);
    std::span<const int32_t> outs = r->outputs();
    EXPECT_EQ(std::vector<int32_t>(outs.begin(), outs.end()), expected_outputs(r->id, 4)) << "request " << r->id;
  }
  EXPECT_EQ(e.kv.num_free_blocks(), 6);
}

TEST(Scheduler, AdmitsByPriorityThenArrival) {
  FakeEngine e(64, 4, config(100, 1));
  const int32_t priorities[] = {1, 0, 1, 0, 2, 0};
  for (RequestId id = 0; id < 6; ++id) e.scheduler.add_request(make_request(id, prompt_of(2), 1, priorities[id]));
  std::vector<RequestId> order;
  while (e.scheduler.has_unfinished()) {
    for (const ScheduledChunk& c : e.step().scheduled) order.push_back(c.id);
  }
  EXPECT_EQ(order, (std::vector<RequestId>{1, 3, 5, 0, 2, 4}));
}

TEST(Scheduler, AbortReleasesBlocksAtOnce) {
  FakeEngine e(16, 4, config(100, 4));
  e.scheduler.add_request(make_request(0, prompt_of(9), 5));
  e.scheduler.add_request(make_request(1, prompt_of(2), 5));
  e.step();
  const int32_t free_before = e.kv.num_free_blocks();
  std::unique_ptr<Request> aborted = e.scheduler.abort_request(0);
  ASSERT_NE(aborted, nullptr);
  EXPECT_EQ(aborted->status, RequestStatus::kFinishedAborted);
  EXPECT_FALSE(e.kv.contains(0));
  EXPECT_EQ(e.kv.num_free_blocks(), free_before + 3);
  EXPECT_EQ(e.scheduler.abort_request(0), nullptr) << "aborting twice is harmless";
  e.kv.check_integrity();
  const SchedulerOutput out = e.step();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].id, 1);
}

TEST(Scheduler, StopFinishesTheRequest) {
  FakeEngine e(16, 4, config(100, 4));
  e.stop_after.insert(3);
  e.scheduler.add_request(make_request(3, prompt_of(5), 10));
  while (e.scheduler.has_unfinished()) e.step();
  ASSERT_EQ(e.finished.size(), 1u);
  EXPECT_EQ(e.finished[0]->status, RequestStatus::kFinishedStopped);
  EXPECT_EQ(e.finished[0]->num_output_tokens(), 2);
  EXPECT_EQ(e.kv.num_free_blocks(), 16);
}

TEST(Scheduler, PrefixHitStartsComputedTokensHigh) {
  FakeEngine e(32, 4, config(100, 4));
  e.scheduler.add_request(make_request(0, prompt_of(10), 1));
  e.step();
  e.scheduler.add_request(make_request(1, prompt_of(11), 1));
  const SchedulerOutput out = e.step();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].first_new_token, 8);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 3);
  EXPECT_EQ(e.kv.stats().prefix_hit_tokens, 8);
}

TEST(Scheduler, ParallelSamplesShareThePromptAndCopyTheLastBlock) {
  FakeEngine e(32, 4, config(100, 8));
  e.scheduler.add_request(make_request(0, prompt_of(6), 3));
  e.step();  // prompt computed, first token sampled
  e.fork(0, 1);
  e.fork(0, 2);
  const std::span<const BlockId> parent_table = e.kv.block_table(0);
  EXPECT_EQ(e.kv.pool().ref_count(parent_table[1]), 3);
  const SchedulerOutput out = e.step();
  ASSERT_EQ(out.scheduled.size(), 3u);
  // The partially filled block is shared by three: the first two writers copy
  // it, the last one writes in place.
  EXPECT_EQ(out.copies.size(), 2u);
  while (e.scheduler.has_unfinished()) e.step();
  ASSERT_EQ(e.finished.size(), 3u);
  for (const auto& r : e.finished) {
    std::span<const int32_t> outs = r->outputs();
    EXPECT_EQ(std::vector<int32_t>(outs.begin(), outs.end()), expected_outputs(r->id, 3)) << "request " << r->id;
  }
  EXPECT_EQ(e.kv.num_free_blocks(), 32);
}

TEST(Scheduler, DraftTokensAreScheduledAndRejectedOnesRolledBack) {
  FakeEngine e(32, 4, config(100, 8));
  Request& r = e.scheduler.add_request(make_request(0, prompt_of(3), 10));
  e.step();  // prompt; one output token, not yet computed
  r.draft_tokens = {500, 501, 502};
  SchedulerOutput out = e.scheduler.schedule();
  ASSERT_EQ(out.scheduled.size(), 1u);
  EXPECT_EQ(out.scheduled[0].first_new_token, 3);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 4) << "the last token and three drafts";
  EXPECT_TRUE(out.scheduled[0].samples);
  // One draft accepted, then a correction.
  const StepTokens verdict{0, {500, 777}, false};
  e.scheduler.update_after_step(out, std::span<const StepTokens>(&verdict, 1));
  EXPECT_EQ(r.num_tokens(), 6);
  EXPECT_EQ(r.num_computed_tokens, 5);
  EXPECT_TRUE(r.draft_tokens.empty());
  EXPECT_EQ(e.kv.num_reserved_tokens(0), 5) << "rejected drafts' slots are given back";
  e.kv.check_integrity();
  out = e.scheduler.schedule();
  EXPECT_EQ(out.scheduled[0].first_new_token, 5);
  EXPECT_EQ(out.scheduled[0].num_new_tokens, 1);
}

}  // namespace
}  // namespace exactly::testing
