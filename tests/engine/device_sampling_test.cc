// The engine's side of sampling on the model's device (RowUse::kSample), on
// the CPU: a test model wraps the real one and samples the rows marked for it
// from nothing but what the batch carries (RowSampling, the penalty tokens,
// the uniform) while poisoning every logits row it was not asked for. The
// engine must then produce exactly the tokens it produces when it samples
// every row itself, for seeded requests of every sampling setting — which
// proves the rows are marked, the penalties listed and the request's draws
// taken as the host's Sampler would. Rows of requests with a logit_bias or a
// grammar are handed over too, with what the model must apply to them first,
// and give the host's tokens. A variant that mishandles one piece (penalties
// ignored, the mask ignored) must be caught.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "engine/engine.h"
#include "engine/output_constraint.h"
#include "real_model_test.h"
#include "run_engine.h"
#include "speculative/rejection_sampler.h"

namespace exactly {
namespace {

enum class Fault { kNone, kIgnorePenalties, kIgnoreMask };

class SamplingModel final : public Model {
 public:
  SamplingModel(std::unique_ptr<Model> inner, Fault fault, int64_t draft_entries)
      : inner_(std::move(inner)), fault_(fault), draft_entries_(draft_entries) {}

  const ModelConfig& config() const override { return inner_->config(); }
  const char* device() const override { return inner_->device(); }
  int64_t weight_bytes() const override { return inner_->weight_bytes(); }
  int64_t kv_bytes_per_slot() const override { return inner_->kv_bytes_per_slot(); }
  void reserve(const ModelLimits& limits) override { inner_->reserve(limits); }
  int64_t default_kv_cache_memory(double u) const override { return inner_->default_kv_cache_memory(u); }
  std::unique_ptr<KVPool> make_kv_pool(int64_t num_blocks, int block_size) override {
    return inner_->make_kv_pool(num_blocks, block_size);
  }
  bool samples_rows() const override { return true; }
  bool processes_rows() const override { return true; }
  int64_t verified_draft_entries() const override { return draft_entries_; }

  void forward(const ForwardBatch& batch, KVPool& kv, float* logits, ThreadPool& pool, int num_layers,
               int32_t* tokens) override {
    check_forward_batch(batch, *this, num_layers);
    ForwardBatch plain = batch;
    plain.jobs.row_use.clear();
    plain.jobs.verifies.clear();
    plain.jobs.row_processing.clear();
    plain.jobs.await_masks = nullptr;
    inner_->forward(plain, kv, logits, pool, num_layers, tokens);
    const auto vocab = static_cast<size_t>(config().vocab_size);
    for (const RowVerify& v : batch.jobs.verifies) {
      verify(v, batch, logits, vocab, tokens);
      ++verified_jobs;
    }
    process(batch, logits, vocab);
    for (size_t i = 0; i < batch.jobs.row_use.size(); ++i) {
      std::span<float> row(logits + i * vocab, vocab);
      if (batch.jobs.row_use[i] == RowUse::kSample) {
        EXPECT_NE(tokens, nullptr);
        tokens[i] = sample(row, batch.jobs.row_sampling[i], batch.jobs.penalty_tokens);
        ++sampled_rows;
      }
      // The engine must not read a row it did not ask for whole.
      if (batch.jobs.row_use[i] != RowUse::kLogits)
        std::fill(row.begin(), row.end(), std::numeric_limits<float>::quiet_NaN());
    }
  }

  int64_t sampled_rows = 0;
  int64_t verified_jobs = 0;
  int64_t processed_rows = 0;

 private:
  // Each processed row biased and masked from what the batch carries alone,
  // as process_row does on the host.
  void process(const ForwardBatch& b, float* logits, size_t vocab) {
    if (b.jobs.await_masks) b.jobs.await_masks();
    std::vector<float> out;
    for (const RowProcessing& p : b.jobs.row_processing) {
      std::span<float> row(logits + static_cast<size_t>(p.row) * vocab, vocab);
      LogitBias bias;
      for (int32_t e = p.bias_begin; e < p.bias_end; ++e)
        bias.push_back({b.jobs.logit_biases[static_cast<size_t>(e)].id, b.jobs.logit_biases[static_cast<size_t>(e)].bias});
      std::span<const uint32_t> mask;
      if (p.mask != nullptr && fault_ != Fault::kIgnoreMask) mask = std::span<const uint32_t>(p.mask, (vocab + 31) / 32);
      process_row(row, bias, mask, out);
      std::copy(out.begin(), out.end(), row.begin());
      ++processed_rows;
    }
  }

  // The host's rejection sampler over what the batch carries for the job.
  void verify(const RowVerify& v, const ForwardBatch& b, const float* logits, size_t vocab, int32_t* tokens) const {
    const auto k = static_cast<size_t>(v.num_drafts);
    std::vector<std::vector<TokenProb>> p(k + 1);
    for (size_t i = 0; i <= k; ++i) {
      const size_t row = static_cast<size_t>(v.first_row) + i;
      p[i] = distribution(std::span<const float>(logits + row * vocab, vocab), b.jobs.row_sampling[row], b.jobs.penalty_tokens);
    }
    std::vector<std::vector<WeightedToken>> q(k);
    std::vector<DistributionView> q_views;
    for (size_t i = 0; i < k; ++i) {
      const size_t at = static_cast<size_t>(v.q_begin) + i;
      for (int32_t e = b.jobs.q_offsets[at]; e < b.jobs.q_offsets[at + 1]; ++e)
        q[i].push_back({b.jobs.q_entries[static_cast<size_t>(e)].id, b.jobs.q_entries[static_cast<size_t>(e)].p});
      q_views.push_back(DistributionView::sparse(std::span<const WeightedToken>(q[i])));
    }
    size_t next = static_cast<size_t>(v.uniform_begin);
    const VerifyOutcome out = RejectionSampler().verify(
        std::span<const int32_t>(b.jobs.verify_drafts).subspan(static_cast<size_t>(v.draft_begin), k), q_views,
        [&](size_t i) { return DistributionView::sparse(std::span<const TokenProb>(p[i])); },
        [&] { return b.jobs.verify_uniforms[next++]; });
    for (size_t i = 0; i <= k; ++i)
      tokens[static_cast<size_t>(v.first_row) + i] = i < out.tokens.size() ? out.tokens[i] : -1;
  }

  std::vector<TokenProb> distribution(std::span<const float> logits, const RowSampling& r,
                                      const std::vector<PenaltyToken>& all) const {
    SamplingParams p;
    p.temperature = r.temperature;
    p.top_k = r.top_k;
    p.top_p = r.top_p;
    p.min_p = r.min_p;
    p.repetition_penalty = r.repetition_penalty;
    p.frequency_penalty = r.frequency_penalty;
    p.presence_penalty = r.presence_penalty;
    p.seed = 0;  // unused: the draws are the batch's
    std::vector<PenalisedToken> penalised;
    if (fault_ != Fault::kIgnorePenalties)
      for (int32_t k = r.penalty_begin; k < r.penalty_end; ++k) {
        const PenaltyToken& t = all[static_cast<size_t>(k)];
        penalised.push_back({t.id, t.output_count, t.in_window != 0});
      }
    return Sampler(p).distribution_with(logits, penalised);
  }

  int32_t sample(std::span<const float> logits, const RowSampling& r, const std::vector<PenaltyToken>& all) const {
    const std::vector<TokenProb> dist = distribution(logits, r, all);
    return r.temperature <= 0.0f ? dist.front().id : Sampler::draw(dist, r.uniform);
  }

  std::unique_ptr<Model> inner_;
  Fault fault_;
  int64_t draft_entries_;
};

class DeviceSampling : public RealModelTest {
 protected:
  static std::vector<RequestParams> requests() {
    struct Setting {
      float temperature;
      int32_t top_k;
      float top_p, min_p, repetition, frequency, presence;
    };
    const Setting settings[] = {
        {0.7f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f},   {1.3f, 0, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f},
        {1.0f, 40, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f},  {1.0f, 0, 0.9f, 0.0f, 1.0f, 0.0f, 0.0f},
        {1.0f, 0, 1.0f, 0.05f, 1.0f, 0.0f, 0.0f},  {0.8f, 40, 0.95f, 0.05f, 1.0f, 0.0f, 0.0f},
        {1.0f, 0, 1.0f, 0.0f, 1.3f, 0.5f, 0.3f},   {0.0f, 0, 1.0f, 0.0f, 1.3f, 0.5f, 0.0f},
        {1.0f, 1, 1.0f, 0.0f, 1.0f, 0.0f, 0.0f},  // one survivor: a draw is still taken
    };
    const char* prompts[] = {"The capital of France is", "def fibonacci(n):", "Once upon a time",
                             "<|im_start|>user\nName three colours.<|im_end|>\n<|im_start|>assistant\n"};
    std::vector<RequestParams> reqs;
    for (int i = 0; i < 18; ++i) {
      const Setting& s = settings[i % std::size(settings)];
      RequestParams r;
      r.prompt = model_->tokenizer->encode(prompts[i % std::size(prompts)], true);
      r.max_tokens = 12;
      r.ignore_eos = true;
      r.sampling.temperature = s.temperature;
      r.sampling.top_k = s.top_k;
      r.sampling.top_p = s.top_p;
      r.sampling.min_p = s.min_p;
      r.sampling.repetition_penalty = s.repetition;
      r.sampling.frequency_penalty = s.frequency;
      r.sampling.presence_penalty = s.presence;
      r.sampling.seed = 100 + static_cast<uint64_t>(i);
      if (i == 16) r.logprobs = 2;  // needs its rows whole: sampled on the host
      if (i == 17) r.n = 2;         // its first row feeds both samples: on the host, then each on the device
      reqs.push_back(r);
    }
    return reqs;
  }

  // Draft-distribution entries the wrapped model takes per step: by default
  // room for whole-vocabulary drafts of every sequence.
  static constexpr int64_t kRoomy = int64_t{1} << 30;

  static std::vector<std::vector<int32_t>> run_with(Fault fault, int64_t* sampled_rows,
                                                     const EngineConfig& c = config(), int64_t* verified = nullptr,
                                                     int64_t draft_entries = kRoomy, EngineStats* stats = nullptr,
                                                     const std::vector<RequestParams>& reqs = requests(),
                                                     int64_t* processed = nullptr) {
    LoadedModel m = load_model(test_model_path(), false);
    auto wrapped = std::make_unique<SamplingModel>(std::move(m.model), fault, draft_entries);
    SamplingModel* probe = wrapped.get();
    m.model = std::move(wrapped);
    auto out = testing::run_engine(m, reqs, c, stats);
    *sampled_rows = probe->sampled_rows;
    if (verified != nullptr) *verified = probe->verified_jobs;
    if (processed != nullptr) *processed = probe->processed_rows;
    return out;
  }

  // requests() with a logit_bias on every third and a grammar on every
  // other: half the vocabulary, a different half at each position.
  static std::vector<RequestParams> processed_requests() {
    std::vector<RequestParams> reqs = requests();
    auto grammar = std::make_shared<HalfTheVocabulary>();
    for (size_t i = 0; i < reqs.size(); ++i) {
      if (i % 3 == 0) reqs[i].logit_bias = {{11, 4.0f}, {198, -3.5f}, {30, 6.0f}, {1000 + static_cast<int32_t>(i), 5.0f}};
      if (i % 2 == 1) {
        reqs[i].constraint = grammar;
        reqs[i].ignore_eos = false;  // a grammar ends at a stop token
      }
    }
    return reqs;
  }

  // Allows token t at position j when (t * 7 + j * 13) / 3 is even: about
  // half the vocabulary, never the same half twice in a row.
  class HalfTheVocabulary final : public Constraint {
   public:
    std::unique_ptr<ConstraintState> start() const override { return std::make_unique<State>(); }

   private:
    struct State final : ConstraintState {
      static bool allowed(int64_t t, int64_t j) { return ((t * 7 + j * 13) / 3) % 2 == 0; }
      void fill_mask(std::span<uint32_t> mask) override {
        std::fill(mask.begin(), mask.end(), 0u);
        for (size_t t = 0; t < mask.size() * 32; ++t)
          if (allowed(static_cast<int64_t>(t), position)) mask[t / 32] |= 1u << (t % 32);
      }
      bool accept(int32_t t) override { return allowed(t, position++); }
      int64_t position = 0;
    };
  };

  static EngineConfig config() {
    EngineConfig c;
    c.max_num_seqs = 8;  // requests join and leave the batch while others decode
    return c;
  }

  // Drafts for every decoding request: greedy verifies (with and without
  // penalties) take each position's token from the model, sampled ones are
  // verified by it (prompt lookup: one-hot drafts; layer skipping: the
  // drafts' own distributions).
  static EngineConfig speculative_config(const std::string& method) {
    EngineConfig c = config();
    c.spec_method = method;
    c.num_speculative_tokens = 3;
    c.adaptive_speculation = false;
    return c;
  }
};

TEST_F(DeviceSampling, SameTokensAsHostSampling) {
  const auto host = testing::run_engine(*model_, requests(), config());
  int64_t sampled = 0;
  const auto device = run_with(Fault::kNone, &sampled);
  EXPECT_GT(sampled, 100) << "the rows were not sampled by the model";
  ASSERT_EQ(host.size(), device.size());
  for (size_t i = 0; i < host.size(); ++i) EXPECT_EQ(host[i], device[i]) << "request " << i;
}

TEST_F(DeviceSampling, SameTokensAsHostSamplingWithSpeculation) {
  for (const char* method : {"ngram", "layerskip:8"}) {
    EngineStats stats;
    const auto host = testing::run_engine(*model_, requests(), speculative_config(method), &stats);
    EXPECT_GT(stats.spec_verifies, 20) << method << ": too few verifies to test";
    int64_t sampled = 0, verified = 0;
    const auto device = run_with(Fault::kNone, &sampled, speculative_config(method), &verified);
    EXPECT_GT(sampled, 20) << method << ": greedy verifies with penalties were not handed to the model";
    EXPECT_GT(verified, 20) << method << ": sampled verifies were not handed to the model";
    ASSERT_EQ(host.size(), device.size());
    for (size_t i = 0; i < host.size(); ++i) EXPECT_EQ(host[i], device[i]) << method << ", request " << i;
  }
}

// With room for few draft-distribution entries per step, the verifies that do
// not fit stay with the host's rejection sampler, in the same step as those
// the model runs, and every token is still the host's.
TEST_F(DeviceSampling, VerifiesBeyondTheModelsRoomStayOnTheHost) {
  const EngineConfig c = speculative_config("layerskip:8");
  const auto host = testing::run_engine(*model_, requests(), c);
  int64_t sampled = 0, verified = 0;
  EngineStats stats;
  const auto device = run_with(Fault::kNone, &sampled, c, &verified, 200, &stats);
  EXPECT_GT(verified, 10) << "no verify fitted the model's room";
  EXPECT_GT(stats.spec_verifies - verified, 10) << "every verify fitted: the room was not tested";
  ASSERT_EQ(host.size(), device.size());
  for (size_t i = 0; i < host.size(); ++i) EXPECT_EQ(host[i], device[i]) << "request " << i;
}

// Biased and masked rows sampled by the model give the host's tokens, and
// the grammar holds at every position.
TEST_F(DeviceSampling, BiasedAndMaskedRowsGiveTheHostsTokens) {
  const std::vector<RequestParams> reqs = processed_requests();
  const auto host = testing::run_engine(*model_, reqs, config());
  int64_t sampled = 0, processed = 0;
  const auto device = run_with(Fault::kNone, &sampled, config(), nullptr, kRoomy, nullptr, reqs, &processed);
  EXPECT_GT(processed, 80) << "processed rows stayed on the host";
  ASSERT_EQ(host.size(), device.size());
  for (size_t i = 0; i < host.size(); ++i) EXPECT_EQ(host[i], device[i]) << "request " << i;
  const auto unprocessed = testing::run_engine(*model_, requests(), config());
  EXPECT_NE(host, unprocessed) << "the bias and the grammar changed nothing: the test cannot tell";
}

TEST_F(DeviceSampling, IgnoringTheMaskIsCaught) {
  // A token the grammar refuses stops the engine (it checks each one).
  int64_t sampled = 0;
  EXPECT_DEATH(run_with(Fault::kIgnoreMask, &sampled, config(), nullptr, kRoomy, nullptr, processed_requests()),
               "grammar refused");
}

TEST_F(DeviceSampling, IgnoringPenaltiesIsCaught) {
  const auto host = testing::run_engine(*model_, requests(), config());
  int64_t sampled = 0;
  const auto broken = run_with(Fault::kIgnorePenalties, &sampled);
  EXPECT_NE(host, broken);
}

}  // namespace
}  // namespace exactly
