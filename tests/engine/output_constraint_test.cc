// Rows processed before sampling (engine/output_constraint.h): the bias and
// mask arithmetic, the mask thread, and the engine under a grammar that
// forbids the model's first choice, checked against the unconstrained engine
// run on the prompt extended by the runner-up.
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <cmath>
#include <map>
#include <mutex>
#include <set>
#include <thread>

#include "engine/engine.h"
#include "engine/output_constraint.h"
#include "real_model_test.h"

namespace exactly {
namespace {

TEST(ProcessRow, AddsTheBiasAndSetsWhatTheMaskLeavesOutToMinusInfinity) {
  const std::vector<float> logits = {1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20, 21, 22,
                                     23, 24, 25, 26, 27, 28, 29, 30, 31, 32, 33, 34};
  std::vector<uint32_t> mask(mask_words(logits.size()), 0);
  for (int t : {0, 5, 31, 32}) mask[t / 32] |= 1u << (t % 32);
  std::vector<float> out;
  process_row(logits, {{5, -2.5f}, {32, 100.0f}, {7, 3.0f}}, mask, out);
  ASSERT_EQ(out.size(), logits.size());
  for (size_t t = 0; t < out.size(); ++t) {
    if (t == 0 || t == 31) EXPECT_EQ(out[t], logits[t]);
    else if (t == 5) EXPECT_EQ(out[t], 6.0f - 2.5f);
    else if (t == 32) EXPECT_EQ(out[t], 33.0f + 100.0f);
    else EXPECT_TRUE(std::isinf(out[t]) && out[t] < 0) << t;
  }
  process_row(logits, {{1, 1.0f}}, {}, out);  // no mask: the bias alone
  EXPECT_EQ(out[1], 3.0f);
  EXPECT_EQ(out[2], 3.0f);
}

TEST(MaskFiller, RunsEveryJobBeforeWaitReturns) {
  MaskFiller filler;
  filler.wait();  // nothing started
  std::atomic<int> done{0};
  for (int round = 0; round < 50; ++round) {
    std::vector<MaskFiller::Job> jobs;
    for (int i = 0; i < 4; ++i) jobs.push_back({static_cast<uint64_t>(i), [&] { done.fetch_add(1); }});
    filler.start(std::move(jobs));
    filler.wait();
    EXPECT_EQ(done.load(), 4 * (round + 1));
  }
}

// Several threads share a step's jobs: each job runs once, wait() returns
// only after the slowest, and a start() right after a start() waits for the
// first step's jobs to finish before handing out the second's.
TEST(MaskFiller, ThreadsRunEachJobOnceAndWaitForTheLast) {
  MaskFiller filler(4);
  std::vector<std::atomic<int>> runs(64);
  for (int round = 0; round < 20; ++round) {
    for (int step = 0; step < 2; ++step) {
      std::vector<MaskFiller::Job> jobs;
      for (size_t i = 0; i < runs.size(); ++i)
        jobs.push_back({i, [&runs, i] {
                          if (i % 16 == 0) std::this_thread::sleep_for(std::chrono::microseconds(200));
                          runs[i].fetch_add(1);
                        }});
      filler.start(std::move(jobs));  // the second start of a round does not wait() first
    }
    filler.wait();
    for (size_t i = 0; i < runs.size(); ++i) ASSERT_EQ(runs[i].load(), 2 * (round + 1)) << "job " << i;
  }
}

// A sequence's masks are filled on one thread step after step (its key's),
// even with other threads idle: a lone job is never taken by another.
TEST(MaskFiller, ASequencesJobsStayOnItsThread) {
  MaskFiller filler(4);
  std::set<std::thread::id> ran_on;
  for (int step = 0; step < 30; ++step) {
    filler.start({{6, [&] { ran_on.insert(std::this_thread::get_id()); }}});
    filler.wait();
  }
  EXPECT_EQ(ran_on.size(), 1u);
}

// Jobs that all name one thread are shared out: idle threads take the last
// ones of its queue while it runs the first.
TEST(MaskFiller, IdleThreadsTakeFromTheLongestQueue) {
  MaskFiller filler(4);
  std::mutex mu;
  std::set<std::thread::id> ran_on;
  std::atomic<int> done{0};
  std::vector<MaskFiller::Job> jobs;
  for (int i = 0; i < 32; ++i)
    jobs.push_back({4, [&] {
                      std::this_thread::sleep_for(std::chrono::milliseconds(1));
                      std::lock_guard lock(mu);
                      ran_on.insert(std::this_thread::get_id());
                      done.fetch_add(1);
                    }});
  filler.start(std::move(jobs));
  filler.wait();
  EXPECT_EQ(done.load(), 32);
  EXPECT_GT(ran_on.size(), 1u);
}

// Forbids one token at the first position only, and counts what it accepts.
class ForbidFirst final : public Constraint {
 public:
  explicit ForbidFirst(int32_t token) : token_(token) {}
  std::unique_ptr<ConstraintState> start() const override { return std::make_unique<State>(token_, accepted_); }
  int accepted() const { return accepted_.load(); }

 private:
  struct State final : ConstraintState {
    State(int32_t forbidden, std::atomic<int>& counter) : token(forbidden), accepted(counter) {}
    void fill_mask(std::span<uint32_t> mask) override {
      std::fill(mask.begin(), mask.end(), ~0u);
      if (position == 0) mask[token / 32] &= ~(1u << (token % 32));
    }
    bool accept(int32_t t) override {
      accepted.fetch_add(1);
      return position++ > 0 || t != token;
    }
    int32_t token;
    std::atomic<int>& accepted;
    int position = 0;
  };
  int32_t token_;
  mutable std::atomic<int> accepted_{0};
};

class ConstrainedEngine : public RealModelTest {
 protected:
  static RequestParams greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
    RequestParams r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;
    r.logprobs = 2;
    r.sampling.temperature = 0.0f;
    return r;
  }

  static std::vector<std::vector<TokenLogprobs>> run(const std::vector<RequestParams>& reqs) {
    EngineConfig config;
    config.threads = 2;
    config.kv_cache_memory = int64_t{64} << 20;
    Engine engine(*model_, config);
    std::map<ClientRequestId, size_t> index;
    for (size_t i = 0; i < reqs.size(); ++i) index[engine.add_request(reqs[i])] = i;
    std::vector<std::vector<TokenLogprobs>> out(reqs.size());
    while (engine.has_unfinished())
      for (const RequestOutput& o : engine.step())
        for (const CompletionDelta& d : o.completions)
          out[index.at(o.id)].insert(out[index.at(o.id)].end(), d.logprobs.begin(), d.logprobs.end());
    EXPECT_EQ(engine.kv_stats().used_blocks, 0);
    return out;
  }
};

TEST_F(ConstrainedEngine, ForbiddingTheFirstChoiceGivesTheRunnerUpThenTheModelsOwnContinuation) {
  const std::vector<int32_t> prompt =
      model_->tokenizer->encode("<|im_start|>user\nName a color.<|im_end|>\n<|im_start|>assistant\n", true);
  const auto plain = run({greedy(prompt, 1)});
  const int32_t first = plain[0][0].id, runner_up = plain[0][0].top[1].first;
  ASSERT_NE(first, runner_up);

  RequestParams constrained = greedy(prompt, 8);
  auto grammar = std::make_shared<ForbidFirst>(first);
  constrained.constraint = grammar;
  constrained.ignore_eos = false;
  RequestParams other = greedy(prompt, 8);  // an unconstrained neighbour in the same batch
  const auto got = run({constrained, other});

  std::vector<int32_t> extended = prompt;
  extended.push_back(runner_up);
  const auto reference = run({greedy(extended, 7)});
  ASSERT_FALSE(got[0].empty());
  EXPECT_EQ(got[0][0].id, runner_up);
  // The logprobs reported are the model's raw ones, mask or not.
  EXPECT_EQ(got[0][0].logprob, plain[0][0].top[1].second);
  for (size_t i = 1; i < got[0].size(); ++i) {
    EXPECT_EQ(got[0][i].id, reference[0][i - 1].id) << i;
    EXPECT_EQ(got[0][i].logprob, reference[0][i - 1].logprob) << i;
  }
  EXPECT_EQ(grammar->accepted(), static_cast<int>(got[0].size()));
  EXPECT_EQ(got[1][0].id, first);  // the neighbour is untouched
}

}  // namespace
}  // namespace exactly
