// Speculative decoding inside the engine: greedy output with n-gram drafts is
// bit-identical to greedy output without them, alone and in a batch, for
// k = 1, 3, 5 — which rests on the kernels' batch invariance (a verify over
// 1 + k tokens gives the same logits as k + 1 single steps).
#include <gtest/gtest.h>


#include "engine/engine.h"
#include "real_model_test.h"
#include "run_engine.h"

namespace exactly {
namespace {

class Speculative : public RealModelTest {
 protected:
  // A prompt that invites copying: the model repeats a passage, so prompt
  // lookup finds long matches.
  static std::vector<int32_t> editing_prompt(int variant) {
    const std::string passage =
        "The quick brown fox jumps over the lazy dog. Pack my box with five dozen liquor jugs. "
        "How vexingly quick daft zebras jump! Sphinx of black quartz, judge my vow number " +
        std::to_string(variant) + ".";
    return model_->tokenizer->encode("<|im_start|>user\nRepeat this text exactly:\n" + passage +
                                         "<|im_end|>\n<|im_start|>assistant\n",
                                     true);
  }
  static RequestParams greedy(std::vector<int32_t> prompt, int64_t max_tokens) {
    RequestParams r;
    r.prompt = std::move(prompt);
    r.max_tokens = max_tokens;
    r.sampling.temperature = 0.0f;
    return r;
  }
  static std::vector<std::vector<int32_t>> run(const std::vector<RequestParams>& reqs, EngineConfig config,
                                               EngineStats* stats = nullptr) {
    config.threads = 2;
    return testing::run_engine(*model_, reqs, config, stats);
  }
};

TEST_F(Speculative, GreedyNgramEqualsPlainGreedyAloneAndInABatch) {
  std::vector<RequestParams> batch;
  for (int i = 0; i < 5; ++i) batch.push_back(greedy(editing_prompt(i), 48));
  const std::vector<std::vector<int32_t>> plain = run(batch, {});
  for (int k : {1, 3, 5}) {
    EngineConfig config;
    config.spec_method = "ngram";
    config.num_speculative_tokens = k;
    EngineStats stats;
    EXPECT_EQ(run({batch[0]}, config).front(), plain[0]) << "alone, k = " << k;
    EXPECT_EQ(run(batch, config, &stats), plain) << "batch, k = " << k;
    EXPECT_GT(stats.spec_accepted_tokens, 0) << "drafts were never accepted; the test would prove nothing";
    EXPECT_LT(stats.steps, 48) << "speculation should have saved steps";
  }
}

TEST_F(Speculative, SeededSampledRequestsStayReproducible) {
  RequestParams r = greedy(editing_prompt(9), 32);
  r.sampling.temperature = 0.8f;
  r.sampling.top_k = 0;
  r.sampling.top_p = 1.0f;
  r.sampling.min_p = 0.0f;
  r.sampling.seed = 11;
  EngineConfig config;
  config.spec_method = "ngram";
  // Adaptive k follows measured step times, and a different k draws a different
  // (equally exact) sample path; a fixed k makes the path a function of the seed.
  config.adaptive_speculation = false;
  const auto a = run({r}, config), b = run({r}, config);
  EXPECT_EQ(a, b);
  EXPECT_EQ(a.front().size(), 32u);
}

}  // namespace
}  // namespace exactly
