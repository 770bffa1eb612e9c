// A pass that paid a one-time set-up (Model::last_forward_was_setup: a CUDA
// graph's first run or capture) does not time a step for speculation's cost
// model. A test model wraps the real one and reports every pass, or none, as
// set-up: with every pass left out no step is ever timed, so adaptive prompt
// lookup never drafts (it waits for a timed plain step); with none left out
// the same editing requests draft. The wrapper's tokens are the real model's.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "real_model_test.h"
#include "run_engine.h"

namespace exactly {
namespace {

class SetupReportingModel final : public Model {
 public:
  SetupReportingModel(std::unique_ptr<Model> inner, bool every_pass_is_setup)
      : inner_(std::move(inner)), setup_(every_pass_is_setup) {}

  const ModelConfig& config() const override { return inner_->config(); }
  const char* device() const override { return inner_->device(); }
  int64_t weight_bytes() const override { return inner_->weight_bytes(); }
  int64_t kv_bytes_per_slot() const override { return inner_->kv_bytes_per_slot(); }
  void reserve(const ModelLimits& limits) override { inner_->reserve(limits); }
  int64_t default_kv_cache_memory(double u) const override { return inner_->default_kv_cache_memory(u); }
  std::unique_ptr<KVPool> make_kv_pool(int64_t num_blocks, int block_size) override {
    return inner_->make_kv_pool(num_blocks, block_size);
  }
  void forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool& pool, int num_layers,
               int32_t* tokens) override {
    inner_->forward(batch, kv, logits, pool, num_layers, tokens);
  }
  bool last_forward_was_setup() const override { return setup_; }

 private:
  std::unique_ptr<Model> inner_;
  bool setup_;
};

class SetupPass : public RealModelTest {
 protected:
  static std::vector<RequestParams> requests() {
    const std::string text =
        "Copy this sentence exactly: the quick brown fox jumps over the lazy dog near the river bank, "
        "and the dog sleeps on. Copy: the quick brown fox jumps over the lazy dog near the river bank,";
    std::vector<RequestParams> reqs(2);
    for (RequestParams& r : reqs) {
      r.prompt = model_->tokenizer->encode(text, true);
      r.max_tokens = 32;
      r.ignore_eos = true;
      r.sampling.temperature = 0;
    }
    return reqs;
  }

  static EngineStats run(bool every_pass_is_setup, std::vector<std::vector<int32_t>>* out) {
    LoadedModel m = load_model(test_model_path(), false);
    m.model = std::make_unique<SetupReportingModel>(std::move(m.model), every_pass_is_setup);
    EngineConfig c;
    c.spec_method = "ngram";
    c.num_speculative_tokens = 3;
    EngineStats stats;
    *out = testing::run_engine(m, requests(), c, &stats);
    return stats;
  }
};

TEST_F(SetupPass, SetupPassesTimeNoStep) {
  std::vector<std::vector<int32_t>> timed_out, setup_out;
  const EngineStats timed = run(false, &timed_out);
  EXPECT_GT(timed.spec_drafted_tokens + timed.spec_probe_drafted_tokens, 0)
      << "the editing requests drafted nothing: the test proves nothing";
  const EngineStats setup = run(true, &setup_out);
  EXPECT_EQ(setup.spec_drafted_tokens + setup.spec_probe_drafted_tokens, 0)
      << "speculation drafted on the time of set-up passes";
  EXPECT_EQ(timed_out, setup_out);  // greedy: speculation changes no token
}

}  // namespace
}  // namespace exactly
