// Properties of generation on the real model. Skipped when the model file is
// absent (scripts/test always fetches it).
#include "engine/generator.h"

#include <gtest/gtest.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>

#include "core/error.h"
#include "engine/loaded_model.h"
#include "real_model_test.h"
#include "sample/rng.h"

namespace exactly {
namespace {

class GeneratorTest : public RealModelTest {
 protected:
  static std::vector<int32_t> random_prompt(int n, uint64_t seed) {
    Rng rng(seed);
    std::vector<int32_t> t(static_cast<size_t>(n));
    for (auto& x : t) x = static_cast<int32_t>(rng.next() % 49152);
    return t;
  }
};

// The logits of every position are bit-identical however the prompt is cut
// into forward passes and however many threads compute them: each row's
// arithmetic never depends on the other rows of its batch.
TEST_F(GeneratorTest, LogitsAreIndependentOfChunkingAndThreads) {
  const auto prompt = random_prompt(80, 1);
  const size_t vocab = static_cast<size_t>(model_->config().vocab_size);
  std::vector<float> reference(prompt.size() * vocab);
  {
    ThreadPool pool(2);
    Generator gen(*model_->model, pool, 128, 512);
    gen.feed_all(prompt, reference.data());
  }
  for (int threads : {1, 2}) {
    for (int chunk : {1, 7, 64}) {
      ThreadPool pool(threads);
      Generator gen(*model_->model, pool, 128, chunk);
      std::vector<float> got(prompt.size() * vocab);
      gen.feed_all(prompt, got.data());
      ASSERT_EQ(std::memcmp(got.data(), reference.data(), got.size() * sizeof(float)), 0)
          << "chunk " << chunk << ", threads " << threads;
    }
  }
}

// feed() of one token after a prefix gives the same logits as that position in
// a single pass over the whole sequence.
TEST_F(GeneratorTest, IncrementalDecodeEqualsFullPass) {
  const auto prompt = random_prompt(40, 2);
  const size_t vocab = static_cast<size_t>(model_->config().vocab_size);
  ThreadPool pool(2);
  std::vector<float> full(prompt.size() * vocab);
  Generator a(*model_->model, pool, 64);
  a.feed_all(prompt, full.data());
  Generator b(*model_->model, pool, 64);
  b.feed(std::span<const int32_t>(prompt.data(), 30));
  for (size_t i = 30; i < prompt.size(); ++i) {
    auto logits = b.feed(std::span<const int32_t>(&prompt[i], 1));
    ASSERT_EQ(std::memcmp(logits.data(), full.data() + i * vocab, vocab * sizeof(float)), 0) << "position " << i;
  }
}

TEST_F(GeneratorTest, ContextOverflowIsAnErrorNotACrash) {
  ThreadPool pool(1);
  Generator gen(*model_->model, pool, 8);
  const auto prompt = random_prompt(9, 3);
  EXPECT_THROW(gen.feed(prompt), Error);
  EXPECT_EQ(gen.size(), 0);
}

TEST_F(GeneratorTest, SeededGenerationIsReproducible) {
  const auto prompt = random_prompt(10, 4);
  SamplingParams sp;
  sp.temperature = 1.0f;
  sp.seed = 42;
  std::vector<int32_t> runs[2];
  for (auto& out : runs) {
    ThreadPool pool(2);
    Generator gen(*model_->model, pool, 64);
    Sampler sampler(sp);
    generate(gen, sampler, prompt, 20, [](int32_t) { return false; }, [&](int32_t id) { out.push_back(id); });
  }
  EXPECT_EQ(runs[0].size(), 20u);
  EXPECT_EQ(runs[0], runs[1]);
}

}  // namespace
}  // namespace exactly
