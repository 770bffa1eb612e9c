// Model-based speculation inside the engine: a draft model with its own paged
// KV cache (the target itself, or its first 8 layers exported to a file of
// their own) and self-drafting with the target's first layers over the
// target's cache. Greedy output is bit-identical to plain greedy output for
// k = 1, 3, 5, alone and in a batch, after preemptions too, and every KV
// block of both caches goes back to its pool.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <limits>
#include <unistd.h>

#include "core/error.h"
#include "engine/spec_method.h"
#include "engine/speculator.h"
#include "kvcache/kv_cache_manager.h"
#include "engine/draft_model.h"
#include "loader/gguf_writer.h"
#include "loader/layer_export.h"
#include "random_head.h"
#include "real_model_test.h"
#include "sample/sampler.h"
#include "speculative/model_drafter.h"
#include "run_engine.h"

namespace exactly {
namespace {

using testing::run_engine;

class SpeculativeModel : public RealModelTest {
 protected:
  static void SetUpTestSuite() {
    RealModelTest::SetUpTestSuite();
    if (!model_) return;
    dir_ = std::filesystem::temp_directory_path() / ("exactly-spec-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    export_first_layers(*model_->file, 8, exported_path());
    testing::write_random_head(head_path(), model_->config(), 7);
    testing::write_random_head(pass_through_path(), model_->config(), 7, 64, 0.08f, /*pass_through=*/true);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(dir_);
    RealModelTest::TearDownTestSuite();
  }
  static std::string exported_path() { return (dir_ / "first8.gguf").string(); }
  static std::string head_path() { return (dir_ / "head.gguf").string(); }
  static std::string pass_through_path() { return (dir_ / "pass-through.gguf").string(); }

  static RequestParams greedy(const std::string& question, int64_t max_tokens) {
    RequestParams r;
    r.prompt = model_->tokenizer->encode("<|im_start|>user\n" + question + "<|im_end|>\n<|im_start|>assistant\n", true);
    r.max_tokens = max_tokens;
    r.ignore_eos = true;  // fixed lengths make the comparison complete
    r.sampling.temperature = 0.0f;
    return r;
  }
  static std::vector<RequestParams> batch() {
    return {greedy("What is a prime number?", 16), greedy("Name three rivers in Europe.", 12),
            greedy("Write a haiku about rain.", 16), greedy("How do bees make honey?", 10)};
  }
  // 16 greedy requests, those whose id `is_short` picks with a short prompt
  // that may generate 6 tokens, the others with a longer one that may
  // generate 4.
  template <typename Pick>
  static std::vector<RequestParams> short_and_long(Pick is_short) {
    std::vector<RequestParams> reqs;
    for (int i = 0; i < 16; ++i)
      reqs.push_back(is_short(i) ? greedy("Hi.", 6) : greedy("Count to " + std::to_string(i + 3) + " slowly, please.", 4));
    return reqs;
  }
  // `reqs` greedy with the adaptive `method` at k = 3: the same tokens as
  // without speculation, and the run's statistics.
  static EngineStats adaptive_run(const std::vector<RequestParams>& reqs, const std::string& method) {
    EngineConfig adaptive = speculating(method, 3);
    adaptive.adaptive_speculation = true;
    EngineStats stats;
    EXPECT_EQ(run_engine(*model_, reqs, adaptive, &stats), run_engine(*model_, reqs, {}));
    return stats;
  }
  static EngineConfig speculating(const std::string& method, int32_t k) {
    EngineConfig c;
    c.spec_method = method;
    c.num_speculative_tokens = k;
    c.adaptive_speculation = false;  // every step drafts k: the equality is tested at that k
    return c;
  }

  static inline std::filesystem::path dir_;
};

TEST_F(SpeculativeModel, TheTargetAsItsOwnDraftHasEveryGreedyDraftAccepted) {
  const auto reqs = batch();
  const auto plain = run_engine(*model_, reqs, {});
  for (const std::string& method : {"draft:" + test_model_path(), std::string("layerskip:30")}) {
    EngineStats stats;
    EXPECT_EQ(run_engine(*model_, reqs, speculating(method, 4), &stats), plain) << method;
    EXPECT_GT(stats.spec_drafted_tokens, 0) << method;
    EXPECT_EQ(stats.spec_accepted_tokens, stats.spec_drafted_tokens) << method;
  }
}

TEST_F(SpeculativeModel, AnAdaptiveDraftModelWaitsForAPlainStepThenProbesWithLookupsAlone) {
  // 16 requests: 4 short prompts that may generate 6 tokens and 12 longer
  // ones that may generate 4, the short ones at ids 0, 4, 8 and 12. The
  // target drafts for itself from a cache of its own, so a request's first
  // drafts would cost a catch-up on its context. The prompt step gives each
  // its first token; the first decode step runs plain, since no decode step
  // has been timed yet; the next verifies probe_draft_tokens(16) = 16
  // drafts, as many from each request as it may draft, in id order: 3 from
  // each short prompt (6 - 2 - 1) and 1 from each longer one (4 - 2 - 1) up
  // to id 9, 10 verifies. All of them are prompt lookups, so the draft
  // computes nothing, and none counts as the draft's. Then the longer ones
  // have at most one token left, and the short ones at most three, which a
  // draft costing as much as the target never pays for. (With the draft
  // making all 16 probe drafts, its passes computed 136 tokens, catching up
  // on 8 contexts; making one request's, 15.)
  const EngineStats stats =
      adaptive_run(short_and_long([](int i) { return i % 4 == 0; }), "draft:" + test_model_path());
  EXPECT_EQ(stats.spec_probe_verifies, 10);
  EXPECT_EQ(stats.spec_probe_drafted_tokens, probe_draft_tokens(16));
  EXPECT_EQ(stats.spec_drafted_tokens, 0);
  EXPECT_EQ(stats.spec_draft_pass_tokens, 0);
}

TEST_F(SpeculativeModel, AnAdaptiveHeadKeepsGreedyOutputAndTimesItsPassesAsDraftPasses) {
  // The head decides like a draft model with its own cache: it probes with
  // lookups, then drafts only where its catch-up pays at the measured costs.
  // Whatever it decides, the tokens are plain greedy's (adaptive_run).
  std::vector<RequestParams> reqs = batch();
  for (RequestParams& r : reqs) r.max_tokens = 40;
  const EngineStats stats = adaptive_run(reqs, "head:" + head_path());
  EXPECT_GT(stats.spec_probe_verifies, 0) << "the engine never measured a verify";
  // A head's drafts each cost a pass, and its first for a request a catch-up too.
  if (stats.spec_drafted_tokens > 0) {
    EXPECT_GT(stats.spec_draft_pass_tokens, stats.spec_drafted_tokens);
  }
}

// Greedy drafts and acceptances of a head whose every draft is `draft_at(j)`
// when the newest token is out[j] (out: the plain greedy output, k drafts a
// step, never past the last token, which is sampled).
template <typename DraftAt>
std::pair<int64_t, int64_t> simulated_drafts(const std::vector<int32_t>& out, int32_t k, DraftAt draft_at) {
  int64_t drafted = 0, accepted = 0;
  for (size_t j = 0; j + 1 < out.size();) {
    const auto n = static_cast<size_t>(std::min<int64_t>(k, static_cast<int64_t>(out.size() - j) - 2));
    if (n == 0) break;
    size_t a = 0;
    while (a < n && out[j + 1 + a] == draft_at(j)) ++a;
    drafted += static_cast<int64_t>(n);
    accepted += static_cast<int64_t>(a);
    j += a + 1;
  }
  return {drafted, accepted};
}

TEST_F(SpeculativeModel, APassThroughHeadDraftsTheNewestTokenFromTheHiddenStateBeforeIt) {
  // fc = [0 | I] and a layer that adds nothing: g_s = h_{s-1} / rms, whose
  // argmax under the target's head is the target's greedy token at s - 1,
  // i.e. x_s itself, and fed back it gives the same again. So each greedy
  // draft repeats the newest token, and which drafts are accepted follows
  // from the plain output alone. A head reading the hidden state of another
  // position (the one before, say) would draft other tokens.
  // The answer goes on "44444, 55555, ...": runs of one digit token, then a
  // comma and a space.
  RequestParams r = greedy("Tell me about the sea.", 40);
  r.prompt = model_->tokenizer->encode(
      "<|im_start|>user\nTell me about the sea.<|im_end|>\n<|im_start|>assistant\n11111, 22222, 33333", true);
  const std::vector<int32_t> plain = run_engine(*model_, {r}, {}).front();
  EngineStats stats;
  EXPECT_EQ(run_engine(*model_, {r}, speculating("head:" + pass_through_path(), 3), &stats).front(), plain);
  const auto expected = simulated_drafts(plain, 3, [&](size_t j) { return plain[j]; });
  const auto off_by_one = simulated_drafts(plain, 3, [&](size_t j) { return j > 0 ? plain[j - 1] : -1; });
  EXPECT_GT(expected.second, 0) << "no repeated token: the test would prove little";
  EXPECT_NE(expected, off_by_one) << "the output cannot tell the right position from the one before";
  EXPECT_EQ(stats.spec_drafted_tokens, expected.first);
  EXPECT_EQ(stats.spec_accepted_tokens, expected.second);
}

TEST_F(SpeculativeModel, LayerSkippingProbesWithOneRequestsDraftsAndLookups) {
  // 16 requests drafting with the target's 30 layers over its own cache.
  // Request 0 may generate 6 tokens, the others 4. The prompt step and a
  // plain decode step give each two; the probe's probe_draft_tokens(16) = 16
  // drafts are 3 from request 0 (6 - 2 - 1), made by the model in 3 passes of
  // one token (its newest, then 2 drafts) and all accepted, and 1 lookup from
  // each of requests 1 to 13 (4 - 2 - 1). Every request then has at most one
  // token left, which is sampled, not drafted.
  const EngineStats stats = adaptive_run(short_and_long([](int i) { return i == 0; }), "layerskip:30");
  EXPECT_EQ(stats.spec_verifies, 1);
  EXPECT_EQ(stats.spec_drafted_tokens, 3);
  EXPECT_EQ(stats.spec_accepted_tokens, 3);
  EXPECT_EQ(stats.spec_probe_verifies, 13);
  EXPECT_EQ(stats.spec_probe_drafted_tokens, 13);
  EXPECT_EQ(stats.spec_draft_pass_tokens, 3);
}

TEST_F(SpeculativeModel, ADraftModelsCostsAreTheTargetsScaledByItsWeightShareUntilItsPassesAreTimed) {
  // The 8-layer export reads its 8 layers and the target's head: a share of
  // the target's weight bytes between 8/30 and 1.
  LoadedModel draft = load_model(exported_path(), false);
  EngineConfig config;
  config.spec_method = "draft:" + exported_path();
  std::unique_ptr<KVPool> kv = model_->model->make_kv_pool(8, config.block_size);
  KVCacheManager kv_manager(8, config.block_size, true);
  Speculator sp(parse_spec_method(config.spec_method), *model_, draft.model.get(), *kv, kv_manager, config,
                int64_t{1} << 24);
  const double share = static_cast<double>(draft.model->weight_bytes()) / static_cast<double>(model_->model->weight_bytes());
  EXPECT_DOUBLE_EQ(sp.weight_fraction(), share);
  EXPECT_GT(share, 8.0 / 30.0);
  EXPECT_LT(share, 1.0);
  const StepCostModel::Fit target{0.012, 0.002};
  EXPECT_FALSE(sp.draft_pass_seconds(4, std::nullopt));
  EXPECT_DOUBLE_EQ(*sp.draft_pass_seconds(4, target), share * (0.012 + 4 * 0.002));
  Request r = make_request(1, model_->tokenizer->encode("<|im_start|>user\nHi.<|im_end|>\n", true), 8);
  const auto before_newest = static_cast<double>(r.tokens.size() - 1);
  EXPECT_EQ(sp.catch_up_tokens(r), static_cast<int64_t>(before_newest));
  EXPECT_DOUBLE_EQ(*sp.catch_up_seconds(r, target), share * 0.002 * before_newest);
  EXPECT_FALSE(sp.catch_up_seconds(r, std::nullopt));
}

// A draft model's run of drafts goes on while the product of its
// confidences stays at DraftRequest::continue_above or more. The 8-layer
// export drafts 5 tokens greedily with no threshold; with one between the
// product of its first two confidences and its first, the same drafter makes
// the same first two drafts and stops.
TEST_F(SpeculativeModel, ADraftModelsRunOfDraftsEndsAtTheFirstDraftItIsUnsureOf) {
  LoadedModel draft = load_model(exported_path(), false);
  const std::vector<int32_t> tokens =
      model_->tokenizer->encode("<|im_start|>user\nName three rivers in Europe.<|im_end|>\n<|im_start|>assistant\n", true);
  SamplingParams sp;
  sp.temperature = 0.0f;
  ThreadPool pool(1);
  const auto drafts_with = [&](double continue_above) {
    std::unique_ptr<KVPool> kv = draft.model->make_kv_pool(16, 16);
    KVCacheManager kv_manager(16, 16, true);
    ModelDrafter drafter(*draft.model, draft.model->config().n_layers, *kv, kv_manager, ModelDrafter::Cache::kOwn,
                         4096);
    Sampler sampler(sp);
    const DraftRequest r{1, tokens, tokens.size(), 5, &sampler, continue_above, 1.0};
    return drafter.propose(std::span<const DraftRequest>(&r, 1), pool).front();
  };
  const Drafts all = drafts_with(0.0);
  ASSERT_EQ(all.tokens.size(), 5u);
  ASSERT_EQ(all.confidence.size(), 5u);
  for (const double c : all.confidence) {
    EXPECT_GT(c, 0.0);
    EXPECT_LE(c, 1.0);
  }
  const double first = all.confidence[0], both = all.confidence[0] * all.confidence[1];
  ASSERT_LT(both, first);
  const Drafts run = drafts_with((first + both) / 2);
  ASSERT_EQ(run.tokens.size(), 2u);
  EXPECT_EQ(run.tokens[0], all.tokens[0]);
  EXPECT_EQ(run.tokens[1], all.tokens[1]);
  EXPECT_EQ(run.confidence[1], all.confidence[1]);
  EXPECT_EQ(run.dists.size(), 2u);
  EXPECT_EQ(drafts_with(first * 1.0001).tokens.size(), 1u);  // unsure of the first: no second
}

// A model on a device returns a plain greedy row's token and its
// probability without its logits (Model::returns_argmax_probabilities). This
// one wraps the CPU export: such rows' logits are overwritten with NaN, so a
// drafter that read them would draft other tokens.
class ArgmaxOnDevice final : public Model {
 public:
  explicit ArgmaxOnDevice(Model& inner) : inner_(inner) {}
  const ModelConfig& config() const override { return inner_.config(); }
  const char* device() const override { return "cpu"; }
  int64_t weight_bytes() const override { return inner_.weight_bytes(); }
  int64_t kv_bytes_per_slot() const override { return inner_.kv_bytes_per_slot(); }
  void reserve(const ModelLimits& l) override { inner_.reserve(l); }
  int64_t default_kv_cache_memory(double u) const override { return inner_.default_kv_cache_memory(u); }
  std::unique_ptr<KVPool> make_kv_pool(int64_t blocks, int size) override { return inner_.make_kv_pool(blocks, size); }
  bool returns_argmax_probabilities() const override { return true; }
  std::span<const float> argmax_probabilities() const override { return probabilities_; }
  int64_t argmax_rows = 0;

  void forward(const ForwardBatch& b, KVPool& kv, float* logits, ThreadPool& pool, int num_layers,
               int32_t* tokens) override {
    inner_.forward(b, kv, logits, pool, num_layers);
    const auto vocab = static_cast<size_t>(config().vocab_size);
    probabilities_.assign(b.input.logits_rows.size(), 0.0f);
    for (size_t r = 0; r < b.jobs.row_use.size(); ++r) {
      if (b.jobs.row_use[r] != RowUse::kArgmax) continue;
      ASSERT_NE(tokens, nullptr);
      ASSERT_TRUE(b.jobs.argmax_probabilities);
      std::span<float> row(logits + r * vocab, vocab);
      tokens[r] = argmax(row);
      double sum = 0;
      for (const float l : row) sum += std::exp(static_cast<double>(l) - row[static_cast<size_t>(tokens[r])]);
      probabilities_[r] = static_cast<float>(1.0 / sum);
      std::fill(row.begin(), row.end(), std::numeric_limits<float>::quiet_NaN());
      ++argmax_rows;
    }
  }

 private:
  Model& inner_;
  std::vector<float> probabilities_;
};

TEST_F(SpeculativeModel, GreedyDraftsOfAModelOnADeviceComeFromItsTokensAndProbabilitiesNotItsLogits) {
  LoadedModel draft = load_model(exported_path(), false);
  ArgmaxOnDevice device(*draft.model);
  const std::vector<int32_t> tokens =
      model_->tokenizer->encode("<|im_start|>user\nName three rivers in Europe.<|im_end|>\n<|im_start|>assistant\n", true);
  ThreadPool pool(1);
  const auto drafts_of = [&](Model& m, float temperature) {
    std::unique_ptr<KVPool> kv = m.make_kv_pool(16, 16);
    KVCacheManager kv_manager(16, 16, true);
    ModelDrafter drafter(m, m.config().n_layers, *kv, kv_manager, ModelDrafter::Cache::kOwn, 4096);
    SamplingParams sp;
    sp.temperature = temperature;
    sp.seed = 3;
    Sampler sampler(sp);
    const DraftRequest r{1, tokens, tokens.size(), 5, &sampler, 0.0, 1.0};
    return drafter.propose(std::span<const DraftRequest>(&r, 1), pool).front();
  };
  const Drafts host = drafts_of(*draft.model, 0.0f), on_device = drafts_of(device, 0.0f);
  EXPECT_EQ(device.argmax_rows, 5);
  EXPECT_EQ(on_device.tokens, host.tokens);
  ASSERT_EQ(on_device.confidence.size(), host.confidence.size());
  for (size_t i = 0; i < host.confidence.size(); ++i)
    EXPECT_NEAR(on_device.confidence[i], host.confidence[i], 1e-6 * host.confidence[i]) << i;
  // A sampled request's drafts need the whole distribution: its rows keep their logits.
  device.argmax_rows = 0;
  EXPECT_EQ(drafts_of(device, 0.8f).tokens, drafts_of(*draft.model, 0.8f).tokens);
  EXPECT_EQ(device.argmax_rows, 0);
}

TEST_F(SpeculativeModel, AnAdaptiveModelDrafterAloneProbesWithEnoughDraftsForAFit) {
  // One request of 6 tokens: the prompt step gives the first, a plain decode
  // step the second, and the probe verifies probe_draft_tokens(1) = 3 drafts,
  // which the target drafting for itself passes, giving the last four. The
  // acceptance prior's k is 2 here: capping the probe by it drafted 2, a step
  // of 3 tokens against the plain one's 1, too little for the cost model to
  // separate its terms.
  const std::vector<RequestParams> reqs = {greedy("Count to 9.", 6)};
  const auto plain = run_engine(*model_, reqs, {});
  EngineConfig adaptive = speculating("layerskip:30", 3);
  adaptive.adaptive_speculation = true;
  EngineStats stats;
  EXPECT_EQ(run_engine(*model_, reqs, adaptive, &stats), plain);
  EXPECT_EQ(stats.spec_drafted_tokens, probe_draft_tokens(1));
  EXPECT_EQ(stats.spec_accepted_tokens, probe_draft_tokens(1));
}

TEST_F(SpeculativeModel, GreedyWithAModelDraftEqualsPlainGreedyAloneAndInABatch) {
  const auto reqs = batch();
  const auto plain = run_engine(*model_, reqs, {});
  for (const std::string& method : {"draft:" + exported_path(), std::string("layerskip:8"), "head:" + head_path()}) {
    for (int32_t k : {1, 3, 5}) {
      EngineStats stats;
      EXPECT_EQ(run_engine(*model_, {reqs[0]}, speculating(method, k)).front(), plain[0])
          << method << " alone, k = " << k;
      EXPECT_EQ(run_engine(*model_, reqs, speculating(method, k), &stats), plain) << method << " batch, k = " << k;
      EXPECT_GT(stats.spec_drafted_tokens, 0) << method << ": nothing was drafted; the test would prove nothing";
    }
  }
}

TEST_F(SpeculativeModel, PreemptionLeavesGreedyOutputAndBothCachesIntact) {
  const auto reqs = batch();
  const auto plain = run_engine(*model_, reqs, {});
  for (const std::string& method : {"draft:" + exported_path(), std::string("layerskip:8"), "head:" + head_path()}) {
    EngineConfig tight = speculating(method, 3);
    // Room for two of the four requests at a time: the scheduler must preempt.
    tight.kv_cache_memory = 16 * 5 * int64_t{46080};
    // The draft runs short too: 3 blocks (12,288 bytes a token for 8 layers,
    // 1,536 for the head's one layer).
    tight.draft_kv_cache_memory = 16 * 3 * int64_t{method.starts_with("head:") ? 1536 : 12288};
    EngineStats stats;
    EXPECT_EQ(run_engine(*model_, reqs, tight, &stats), plain) << method;
    EXPECT_GT(stats.preemptions, 0) << method << ": the pool was meant to force preemptions";
    EXPECT_GT(stats.spec_drafted_tokens, 0) << method;
  }
}

TEST_F(SpeculativeModel, SampledRequestsWithSiblingsFinishAndReturnEveryBlock) {
  RequestParams r = greedy("Tell me a joke.", 20);
  r.sampling.temperature = 0.9f;
  r.sampling.seed = 3;
  r.sampling.repetition_penalty = 1.1f;
  r.n = 3;
  for (const std::string& method : {"draft:" + exported_path(), std::string("layerskip:8"), "head:" + head_path()}) {
    const auto a = run_engine(*model_, {r}, speculating(method, 3));
    EXPECT_EQ(a, run_engine(*model_, {r}, speculating(method, 3))) << method << ": seeded runs differ";
    EXPECT_EQ(a.front().size(), 60u) << method;
  }
}

// The Engine refuses what it cannot honour, with the exit code the CLI uses.
ExitCode engine_error(LoadedModel& model, const std::string& method, std::string* message = nullptr) {
  EngineConfig c;
  c.spec_method = method;
  c.kv_cache_memory = 16 << 20;  // allocated (and populated) before some checks run: keep it small
  try {
    Engine engine(model, c);
  } catch (const Error& e) {
    if (message) *message = e.what();
    return e.code();
  }
  return ExitCode::kOk;
}

TEST_F(SpeculativeModel, BadMethodsAreRefusedWithClearErrors) {
  std::string message;
  EXPECT_EQ(engine_error(*model_, "medusa", &message), ExitCode::kUsage);
  EXPECT_NE(message.find("not a known method"), std::string::npos) << message;
  for (const char* bad :
       {"layerskip:0", "layerskip:31", "layerskip:-2", "layerskip:two", "layerskip:", "draft:", "head:"}) {
    EXPECT_EQ(engine_error(*model_, bad, &message), ExitCode::kUsage) << bad;
    EXPECT_NE(message.find(bad), std::string::npos) << message;
  }
  const std::string missing = (dir_ / "no-such-model.gguf").string();
  EXPECT_EQ(engine_error(*model_, "draft:" + missing, &message), ExitCode::kBadInput);
  EXPECT_NE(message.find(missing), std::string::npos) << message;
  EXPECT_EQ(engine_error(*model_, "head:" + missing, &message), ExitCode::kBadInput);
  EXPECT_NE(message.find("--spec head:" + missing), std::string::npos) << message;
  // A draft model is no head, nor a head a draft model.
  EXPECT_EQ(engine_error(*model_, "head:" + exported_path(), &message), ExitCode::kBadInput);
  EXPECT_NE(message.find("is not a draft head"), std::string::npos) << message;
  EXPECT_EQ(engine_error(*model_, "draft:" + head_path(), &message), ExitCode::kBadInput);
}

TEST_F(SpeculativeModel, AHeadsDraftsAreDrawnFromItsOwnPassesAndItsCacheIsReturned) {
  // Sampled, several requests, k = 4: the head catches up on each prompt,
  // drafts from its own hidden states, and gives back every block.
  std::vector<RequestParams> reqs = batch();
  for (size_t i = 0; i < reqs.size(); ++i) {
    reqs[i].sampling.temperature = 0.8f;
    reqs[i].sampling.seed = 40 + i;
  }
  EngineStats stats;
  const auto a = run_engine(*model_, reqs, speculating("head:" + head_path(), 4), &stats);
  EXPECT_EQ(a, run_engine(*model_, reqs, speculating("head:" + head_path(), 4))) << "seeded runs differ";
  EXPECT_GT(stats.spec_drafted_tokens, 0);
  EXPECT_GT(stats.spec_draft_pass_tokens, stats.spec_drafted_tokens) << "the head never caught up on a prompt";
}

// A model that is neither the CPU's nor the GPU's llama: a head asks for
// the target's hidden states and tables, so it is refused before any of it runs.
class OtherDeviceModel final : public Model {
 public:
  explicit OtherDeviceModel(ModelConfig c) : config_(std::move(c)) {}
  const ModelConfig& config() const override { return config_; }
  const char* device() const override { return "cuda"; }
  int64_t weight_bytes() const override { return 1; }
  int64_t kv_bytes_per_slot() const override { return 1; }
  void reserve(const ModelLimits&) override {}
  int64_t default_kv_cache_memory(double) const override { return 1; }
  std::unique_ptr<KVPool> make_kv_pool(int64_t, int) override { return nullptr; }
  void forward(const ForwardBatch&, KVPool&, float*, ThreadPool&, int, int32_t*) override { FAIL() << "ran"; }

 private:
  ModelConfig config_;
};

TEST_F(SpeculativeModel, AHeadOnAModelItCannotAttachToIsRefusedSayingSo) {
  LoadedModel gpu;
  gpu.model = std::make_unique<OtherDeviceModel>(model_->config());
  try {
    load_draft_head(head_path(), gpu);
    ADD_FAILURE() << "a head was loaded for a model it cannot attach to";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), ExitCode::kBadInput);
    EXPECT_NE(std::string(e.what()).find("draft heads attach to a llama model of one rank"), std::string::npos) << e.what();
  }
}

TEST_F(SpeculativeModel, ADraftWithAnotherVocabularyIsRefusedNamingTheDifference) {
  // The target with two tokens swapped: a valid model (its merges still name
  // existing tokens) whose ids mean other texts.
  std::vector<std::pair<std::string, GGUFValue>> metadata = model_->file->metadata();
  for (auto& [key, value] : metadata) {
    if (key != "tokenizer.ggml.tokens") continue;
    auto tokens = std::make_shared<GGUFArray>(*std::get<std::shared_ptr<GGUFArray>>(value.v));
    std::swap(tokens->items[100], tokens->items[101]);
    value.v = tokens;
  }
  std::vector<GGUFTensorToWrite> tensors;
  for (const GGUFTensorInfo& t : model_->file->tensors())
    tensors.push_back({t.name, t.shape, t.type, std::span<const uint8_t>(t.data, t.nbytes)});
  const std::string path = (dir_ / "swapped.gguf").string();
  write_gguf(path, metadata, tensors);
  std::string message;
  EXPECT_EQ(engine_error(*model_, "draft:" + path, &message), ExitCode::kUsage);
  const std::string& t100 = model_->tokenizer->token_text(100);
  const std::string& t101 = model_->tokenizer->token_text(101);
  EXPECT_NE(message.find("token 100 is '" + t101 + "' in the draft and '" + t100 + "' in the target"),
            std::string::npos)
      << message;
}

}  // namespace
}  // namespace exactly
