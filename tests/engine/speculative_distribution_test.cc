// Speculative sampling keeps the target's distribution inside the real
// engine, on the real model: many seeded requests of one prompt are sampled
// at temperature 1 (top-k 20, so the draft's distribution is filtered as the
// target's is and the joint law has few enough cells to count), and the joint
// law of the first two generated tokens with speculation passes a chi-square
// goodness-of-fit test against the exact law without it — computed from the
// engine's own logits, so it carries no sampling noise — while a deliberately
// wrong acceptance rule, put in through EngineConfig::acceptance_rule, fails
// the same test.
//
// The second token is the first one a verify decides: after the first token
// is sampled from the prompt's logits, one draft (k = 1) is verified in the
// next step. Requests may generate 3 tokens (drafts never reach past
// max_tokens) and are aborted once every completion has its first two.
// Cells whose expected count is small are pooled, within their first token's
// row and then into one cell for everything else. The false-alarm rate is
// 1e-4 per test; seeds are fixed, so the outcome is deterministic.
#include <gtest/gtest.h>

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <filesystem>
#include <map>

#include "../speculative/chi_square.h"
#include "../speculative/wrong_rules.h"
#include "engine/engine.h"
#include "loader/layer_export.h"
#include "random_head.h"
#include "real_model_test.h"

namespace exactly {
namespace {

constexpr int32_t kTopK = 20;
constexpr int kDraftLayers = 8;
constexpr int32_t kCompletions = 125;  // siblings of a request share the prompt's KV and first logits
constexpr double kFalseAlarmRate = 1e-4;
constexpr double kMinExpected = 10;  // smaller cells are pooled

using TokenLaw = std::vector<std::pair<int32_t, double>>;  // [kTopK] (token, probability)

class SpeculativeDistribution : public RealModelTest {
 protected:
  static void SetUpTestSuite() {
    RealModelTest::SetUpTestSuite();
    if (!model_) return;
    dir_ = std::filesystem::temp_directory_path() / ("exactly-dist-" + std::to_string(getpid()));
    std::filesystem::create_directories(dir_);
    export_first_layers(*model_->file, kDraftLayers, draft_path());
    testing::write_random_head(head_path(), model_->config(), 11, 64, 0.08f, /*pass_through=*/true);
  }
  static void TearDownTestSuite() {
    std::filesystem::remove_all(dir_);
    RealModelTest::TearDownTestSuite();
  }
  static std::string draft_path() { return (dir_ / "first8.gguf").string(); }
  static std::string head_path() { return (dir_ / "head.gguf").string(); }

  // Colours the assistant is repeating: its next tokens mostly occurred in
  // the prompt already, so prompt lookup has drafts to offer. 28 tokens, a
  // whole number of blocks: every prompt block is shared through the prefix
  // caches, so a new sibling's draft sequence catches up on one token alone.
  static std::vector<int32_t> prompt() {
    const std::vector<int32_t> p = model_->tokenizer->encode(
        "<|im_start|>user\nSay these colours again: red green blue yellow red green blue yellow<|im_end|>\n"
        "<|im_start|>assistant\nred green blue yellow red green",
        true);
    EXPECT_EQ(p.size() % static_cast<size_t>(base_config().block_size), 0u) << p.size() << " tokens";
    return p;
  }

  static SamplingParams sampling(uint64_t seed) {
    SamplingParams s;
    s.temperature = 1.0f;
    s.top_k = kTopK;
    s.top_p = 1.0f;
    s.min_p = 0.0f;
    s.seed = seed;
    return s;
  }

  static EngineConfig base_config() {
    EngineConfig c;
    c.threads = 2;
    c.block_size = 4;                  // each sibling's own tokens take one small block
    c.kv_cache_memory = int64_t{512} << 20;
    c.max_num_seqs = 8;                // requests admitted at once; their siblings run beside them
    return c;
  }

  // What the sampler draws from after `context`: the top kTopK tokens of the
  // raw distribution, renormalised (temperature 1), from the engine's logprobs.
  static std::vector<TokenLaw> next_token_laws(const std::vector<std::vector<int32_t>>& contexts) {
    Engine engine(*model_, base_config());
    std::map<ClientRequestId, size_t> index;
    for (size_t i = 0; i < contexts.size(); ++i) {
      RequestParams r;
      r.prompt = contexts[i];
      r.max_tokens = 1;
      r.logprobs = kTopK;
      r.sampling.temperature = 0.0f;
      index[engine.add_request(r)] = i;
    }
    std::vector<TokenLaw> laws(contexts.size());
    while (engine.has_unfinished()) {
      for (const RequestOutput& o : engine.step()) {
        for (const CompletionDelta& d : o.completions) {
          if (d.logprobs.empty()) continue;
          double total = 0;
          for (const auto& [id, lp] : d.logprobs.front().top) total += std::exp(lp);
          for (const auto& [id, lp] : d.logprobs.front().top) laws[index.at(o.id)].push_back({id, std::exp(lp) / total});
        }
      }
    }
    return laws;
  }

  // The cells of the test: frequent (first, second) pairs, the rest of each
  // frequent first token's row, and everything else.
  struct Cells {
    std::map<std::pair<int32_t, int32_t>, size_t> pair_cell;
    std::map<int32_t, size_t> row_cell;
    size_t other = 0;
    std::vector<double> probs;  // [n_cells]

    size_t of(int32_t first, int32_t second) const {
      if (auto it = pair_cell.find({first, second}); it != pair_cell.end()) return it->second;
      if (auto it = row_cell.find(first); it != row_cell.end()) return it->second;
      return other;
    }
  };

  static Cells exact_cells(int samples) {
    const std::vector<int32_t> p = prompt();
    const TokenLaw first = next_token_laws({p}).front();
    std::vector<std::vector<int32_t>> contexts;
    TokenLaw frequent;
    for (const auto& [t1, p1] : first) {
      if (p1 * samples < kMinExpected) continue;
      frequent.push_back({t1, p1});
      contexts.push_back(p);
      contexts.back().push_back(t1);
    }
    const std::vector<TokenLaw> second = next_token_laws(contexts);
    Cells c;
    c.probs.push_back(0.0);  // the pooled rest
    for (size_t i = 0; i < frequent.size(); ++i) {
      const auto [t1, p1] = frequent[i];
      double row_rest = 0;
      for (const auto& [t2, p2] : second[i]) {
        if (p1 * p2 * samples < kMinExpected) {
          row_rest += p1 * p2;
          continue;
        }
        c.pair_cell[{t1, t2}] = c.probs.size();
        c.probs.push_back(p1 * p2);
      }
      if (row_rest * samples >= kMinExpected) {
        c.row_cell[t1] = c.probs.size();
        c.probs.push_back(row_rest);
      } else {
        c.probs[c.other] += row_rest;
      }
    }
    double kept = 0;
    for (double q : c.probs) kept += q;
    c.probs[c.other] += 1.0 - kept;  // first tokens too rare for a row of their own
    return c;
  }

  struct Sampled {
    std::vector<int64_t> counts;  // [n_cells]
    EngineStats stats;
  };

  // `samples` completions (first two tokens each) from requests of kCompletions.
  static Sampled sample(EngineConfig config, const Cells& cells, int samples, uint64_t seed) {
    Engine engine(*model_, config);
    const std::vector<int32_t> p = prompt();
    std::map<ClientRequestId, std::vector<std::vector<int32_t>>> tokens;
    for (int done = 0; done < samples; done += kCompletions) {
      RequestParams r;
      r.prompt = p;
      r.n = std::min(kCompletions, samples - done);
      r.max_tokens = 3;
      r.ignore_eos = true;
      r.sampling = sampling(seed + static_cast<uint64_t>(done));
      tokens[engine.add_request(r)].resize(static_cast<size_t>(r.n));
      if (done == 0) {
        // The first request alone first, so that the prompt's blocks are in
        // both prefix caches before the others arrive.
        while (engine.has_unfinished()) collect(engine, engine.step(), tokens);
      }
    }
    while (engine.has_unfinished()) collect(engine, engine.step(), tokens);
    engine.check_integrity();
    EXPECT_EQ(engine.kv_stats().used_blocks, 0);
    EXPECT_EQ(engine.draft_kv_stats().used_blocks, 0);
    Sampled s{std::vector<int64_t>(cells.probs.size(), 0), engine.stats()};
    for (const auto& [id, completions] : tokens)
      for (const auto& t : completions) {
        EXPECT_GE(t.size(), 2u);
        if (t.size() >= 2) ++s.counts[cells.of(t[0], t[1])];
      }
    return s;
  }

  // Appends new tokens; aborts a request once every completion has two.
  static void collect(Engine& engine, const std::vector<RequestOutput>& outputs,
                      std::map<ClientRequestId, std::vector<std::vector<int32_t>>>& tokens) {
    for (const RequestOutput& o : outputs) {
      auto& completions = tokens.at(o.id);
      for (const CompletionDelta& d : o.completions)
        completions[static_cast<size_t>(d.index)].insert(completions[static_cast<size_t>(d.index)].end(),
                                                         d.token_ids.begin(), d.token_ids.end());
      bool all_have_two = !o.finished;
      for (const auto& t : completions) all_have_two = all_have_two && t.size() >= 2;
      if (all_have_two) engine.abort(o.id);
    }
  }

  // The chi-square statistic and its critical value at kFalseAlarmRate.
  static std::pair<double, double> chi_square(const Sampled& s, const Cells& cells, const char* what) {
    int dof = 0;
    const double stat = testing::chi_square_statistic(s.counts, cells.probs, &dof);
    const double critical = testing::chi_square_upper_quantile(kFalseAlarmRate, dof);
    std::printf("%s: chi2 %.1f, %d degrees of freedom, critical value %.1f; %lld drafts, %lld accepted\n", what, stat,
                dof, critical, static_cast<long long>(s.stats.spec_drafted_tokens),
                static_cast<long long>(s.stats.spec_accepted_tokens));
    return {stat, critical};
  }

  static EngineConfig speculating(const std::string& method, const AcceptanceRule& rule = kModifiedRejection) {
    EngineConfig c = base_config();
    c.spec_method = method;
    c.num_speculative_tokens = 1;
    c.adaptive_speculation = false;
    c.acceptance_rule = rule;
    return c;
  }

  static inline std::filesystem::path dir_;
};

// 10,000 samples against the exact law test as sharply as 20,000 with
// speculation against 20,000 without would (a two-sample comparison has
// twice the variance), at half the cost: each proposer's run takes about a
// minute on two cores.
constexpr int kSamples = 10000;
// Wrong rules miss by far more than sampling noise.
constexpr int kWrongRuleSamples = 2000;

TEST_F(SpeculativeDistribution, PromptLookupKeepsTheJointLawOfTheFirstTwoTokens) {
  const Cells cells = exact_cells(kSamples);
  const Sampled s = sample(speculating("ngram"), cells, kSamples, 1000);
  const auto [stat, critical] = chi_square(s, cells, "ngram");
  EXPECT_LT(stat, critical);
  EXPECT_GT(s.stats.spec_drafted_tokens, kSamples / 2) << "too few drafts to test anything";
}

TEST_F(SpeculativeDistribution, ADraftModelKeepsTheJointLawOfTheFirstTwoTokens) {
  const Cells cells = exact_cells(kSamples);
  const Sampled s = sample(speculating("draft:" + draft_path()), cells, kSamples, 2000000);
  const auto [stat, critical] = chi_square(s, cells, "draft model");
  EXPECT_LT(stat, critical);
  EXPECT_GT(s.stats.spec_drafted_tokens, kSamples * 9 / 10) << "too few drafts to test anything";
}

// A draft head's q comes from its own passes over the target's hidden
// states (a pass-through head: the target's previous distribution,
// flattened, so that both acceptances and residual draws are many). Half the
// other proposers' samples keep the run near a minute; the false-alarm rate
// is the same 1e-4, the power to see a small error lower.
constexpr int kHeadSamples = kSamples / 2;

TEST_F(SpeculativeDistribution, ADraftHeadKeepsTheJointLawOfTheFirstTwoTokens) {
  const Cells cells = exact_cells(kHeadSamples);
  const Sampled s = sample(speculating("head:" + head_path()), cells, kHeadSamples, 5000000);
  const auto [stat, critical] = chi_square(s, cells, "draft head");
  EXPECT_LT(stat, critical);
  EXPECT_GT(s.stats.spec_drafted_tokens, kHeadSamples * 9 / 10) << "too few drafts to test anything";
  EXPECT_GT(s.stats.spec_accepted_tokens, kHeadSamples / 20) << "too few acceptances to test the accepting branch";
  EXPECT_LT(s.stats.spec_accepted_tokens, s.stats.spec_drafted_tokens * 19 / 20) << "too few rejections";
}

TEST_F(SpeculativeDistribution, WrongAcceptanceRulesFailTheSameTest) {
  const Cells cells = exact_cells(kWrongRuleSamples);
  struct Case {
    std::string method;
    AcceptanceRule rule;
    const char* what;
  };
  const Case cases[] = {
      {"ngram", testing::kWrongAcceptWhenDraftDominates, "ngram, accepting whenever q(x) >= p(x)"},
      {"ngram", testing::kWrongResampleFromTarget, "ngram, resampling from p after a rejection"},
      {"draft:" + draft_path(), testing::kWrongAcceptWhenDraftDominates, "draft model, accepting whenever q(x) >= p(x)"},
      {"head:" + head_path(), testing::kWrongAcceptWhenDraftDominates, "draft head, accepting whenever q(x) >= p(x)"},
  };
  uint64_t seed = 3000000;
  for (const Case& c : cases) {
    const Sampled s = sample(speculating(c.method, c.rule), cells, kWrongRuleSamples, seed += 1000000);
    const auto [stat, critical] = chi_square(s, cells, c.what);
    EXPECT_GT(stat, critical) << c.what;
  }
}

}  // namespace
}  // namespace exactly
