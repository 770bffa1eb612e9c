// `exactly bench spec-cost`: what a verify step costs, and the speedup that
// speculation would give at a given acceptance rate with that cost.
//
// For each batch size B, B sequences hold `--context` tokens of KV; then a
// step of 1 + k tokens per sequence (the last accepted token and k drafts, at
// the next positions) runs for k = 0 .. --max-drafts, each row's argmax
// wanted, as a greedy verify step asks. k = 0 is a plain decode step. The
// time is the median over repetitions of the whole forward call (the step's
// device work and its copies back), after two warm-up calls.
//
// With acceptance rate a, independent per draft, a chain of k drafts yields
// (1 - a^(k+1)) / (1 - a) tokens a step, so the speedup over plain decoding
// is that times t(0) / t(k), best over k. Drafts are taken as free (prompt
// lookup's are; a draft model's or head's passes add to t(k)), so the figure
// is the ceiling the step's cost allows.
#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "core/thread_pool.h"
#include "engine/loaded_model.h"
#include "model/forward_batch.h"
#include "sample/rng.h"

namespace exactly::cli {

namespace {

constexpr int32_t kBlockSize = 16;
constexpr int kMaxDraftsBound = 16;
constexpr int kMaxBatchBound = 1024;

struct SpecCostOptions {
  ModelOptions model;
  std::vector<int> batch_sizes = {1, 4, 16, 64};
  int context = 512;
  int max_drafts = 8;
  int repetitions = 5;
  std::vector<double> acceptance = {0.6, 0.7, 0.8};
  std::string json_out;
};

double median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

// Sequences with their own blocks and a filled context, and steps over them.
class StepBench {
 public:
  StepBench(LoadedModel& m, int max_batch, int context, int max_drafts)
      : m_(m), context_(context), blocks_per_seq_((context + max_drafts + 1 + kBlockSize - 1) / kBlockSize),
        vocab_(m.config().vocab_size), rng_(1234) {
    const int64_t max_rows = int64_t{max_batch} * (max_drafts + 1);
    m.model->reserve({std::max<int64_t>(max_rows, context), max_batch, context + max_drafts + 1, kBlockSize});
    kv_ = m.model->make_kv_pool(int64_t{max_batch} * blocks_per_seq_ + 1, kBlockSize);
    logits_.resize(static_cast<size_t>(max_rows * vocab_));
    tokens_.resize(static_cast<size_t>(max_rows));
    for (int s = 0; s < max_batch; ++s) fill_context(s);
  }

  // Milliseconds of one step of 1 + k tokens for each of the first `batch`
  // sequences: median of `reps` after two warm-ups.
  double step_ms(int batch, int k, int reps) {
    build_step(batch, k);
    for (int i = 0; i < 2; ++i) run();
    std::vector<double> ms;
    for (int r = 0; r < reps; ++r) ms.push_back(run());
    return median(ms);
  }

 private:
  std::vector<int32_t> table(int s) const {
    std::vector<int32_t> t(static_cast<size_t>(blocks_per_seq_));
    for (int i = 0; i < blocks_per_seq_; ++i) t[static_cast<size_t>(i)] = 1 + s * blocks_per_seq_ + i;
    return t;
  }
  int32_t random_token() { return static_cast<int32_t>(rng_.next() % static_cast<uint64_t>(vocab_)); }

  void fill_context(int s) {
    const std::vector<int32_t> t = table(s);
    batch_.reset(1, t.size());
    batch_.begin_sequence(0, t);
    for (int p = 0; p < context_; ++p) batch_.push_token(random_token(), p, t, kBlockSize);
    batch_.end_sequence(context_);
    batch_.logits_rows = {context_ - 1};
    batch_.row_use = {RowUse::kArgmax};
    m_.model->forward(batch_, *kv_, logits_.data(), pool_, -1, tokens_.data());
  }

  void build_step(int batch, int k) {
    batch_.reset(static_cast<size_t>(batch), static_cast<size_t>(blocks_per_seq_));
    for (int s = 0; s < batch; ++s) {
      const std::vector<int32_t> t = table(s);
      batch_.begin_sequence(static_cast<size_t>(s), t);
      for (int j = 0; j <= k; ++j) {
        batch_.logits_rows.push_back(static_cast<int32_t>(batch_.tokens.size()));
        batch_.row_use.push_back(RowUse::kArgmax);
        batch_.push_token(random_token(), context_ + j, t, kBlockSize);
      }
      batch_.end_sequence(context_ + k + 1);
    }
  }

  double run() {
    const auto t0 = std::chrono::steady_clock::now();
    m_.model->forward(batch_, *kv_, logits_.data(), pool_, -1, tokens_.data());
    return 1e3 * std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  }

  LoadedModel& m_;
  int context_, blocks_per_seq_;
  int32_t vocab_;
  Rng rng_;
  ThreadPool pool_{ThreadPool::default_threads()};
  std::unique_ptr<KVPool> kv_;
  ForwardBatch batch_;
  std::vector<float> logits_;
  std::vector<int32_t> tokens_;
};

// Tokens a step yields with k drafts accepted independently at rate a.
double tokens_per_step(double a, int k) { return (1 - std::pow(a, k + 1)) / (1 - a); }

void check_options(const SpecCostOptions& o) {
  for (int b : o.batch_sizes)
    if (b < 1 || b > kMaxBatchBound)
      throw Error(strformat("--batch-sizes: %d is not between 1 and %d", b, kMaxBatchBound), ExitCode::kUsage);
  if (o.max_drafts < 1 || o.max_drafts > kMaxDraftsBound)
    throw Error(strformat("--max-drafts must be between 1 and %d", kMaxDraftsBound), ExitCode::kUsage);
  if (o.context < 1 || o.context > 1 << 20) throw Error("--context must be between 1 and 1048576", ExitCode::kUsage);
  for (double a : o.acceptance)
    if (!(a > 0 && a < 1)) throw Error(strformat("--acceptance: %g is not inside (0, 1)", a), ExitCode::kUsage);
}

void run(const SpecCostOptions& o) {
  check_options(o);
  LoadedModel m = load_model(o.model.model, true, o.model.load_options());
  const int max_batch = *std::max_element(o.batch_sizes.begin(), o.batch_sizes.end());
  StepBench bench(m, max_batch, o.context, o.max_drafts);
  const std::string name = m.config().name.empty() ? o.model.model : m.config().name;
  std::printf("%s on %s: a step of 1 + k tokens per sequence at %d tokens of context, ms (median of %d)\n",
              name.c_str(), m.model->device(), o.context, o.repetitions);
  std::printf("| batch |");
  for (int k = 0; k <= o.max_drafts; ++k) std::printf(" k=%d |", k);
  std::printf("\n| ---: |");
  for (int k = 0; k <= o.max_drafts; ++k) std::printf(" ---: |");
  std::printf("\n");
  nlohmann::json results = nlohmann::json::array();
  std::vector<std::vector<double>> times;
  for (int batch : o.batch_sizes) {
    std::vector<double> t;
    std::printf("| %d |", batch);
    for (int k = 0; k <= o.max_drafts; ++k) {
      t.push_back(bench.step_ms(batch, k, o.repetitions));
      std::printf(" %.3f |", t.back());
      std::fflush(stdout);
    }
    std::printf("\n");
    times.push_back(t);
  }
  std::printf("\nSpeedup over plain decoding with free drafts (best k in brackets):\n| batch |");
  for (double a : o.acceptance) std::printf(" acceptance %.2f |", a);
  std::printf("\n| ---: |");
  for (size_t i = 0; i < o.acceptance.size(); ++i) std::printf(" ---: |");
  std::printf("\n");
  for (size_t b = 0; b < times.size(); ++b) {
    const std::vector<double>& t = times[b];
    nlohmann::json row = {{"batch", o.batch_sizes[b]}, {"step_ms", t}, {"speedup", nlohmann::json::array()}};
    std::printf("| %d |", o.batch_sizes[b]);
    for (double a : o.acceptance) {
      double best = 1.0;
      int best_k = 0;
      for (int k = 1; k <= o.max_drafts; ++k) {
        const double s = tokens_per_step(a, k) * t[0] / t[static_cast<size_t>(k)];
        if (s > best) best = s, best_k = k;
      }
      std::printf(" %.2fx (%d) |", best, best_k);
      row["speedup"].push_back({{"acceptance", a}, {"speedup", best}, {"k", best_k}});
    }
    std::printf("\n");
    results.push_back(row);
  }
  if (!o.json_out.empty()) {
    nlohmann::json j = {{"model", name}, {"device", m.model->device()}, {"context", o.context},
                        {"repetitions", o.repetitions}, {"results", results}};
    std::ofstream(o.json_out) << j.dump(2) << '\n';
  }
}

}  // namespace

void register_bench_spec_cost(CLI::App& bench) {
  auto o = std::make_shared<SpecCostOptions>();
  CLI::App* cmd = bench.add_subcommand(
      "spec-cost", "the cost of a verify step of 1 + k tokens, and the speedup it allows at given acceptance rates");
  add_model_options(*cmd, o->model);
  cmd->add_option("--batch-sizes", o->batch_sizes, "sequences per step")->delimiter(',')->capture_default_str();
  cmd->add_option("--context", o->context, "tokens of KV each sequence holds")->capture_default_str();
  cmd->add_option("--max-drafts", o->max_drafts, "measure k = 0 .. this many drafts")->capture_default_str();
  cmd->add_option("-r,--repetitions", o->repetitions, "timed steps per cell")->capture_default_str()
      ->check(CLI::Range(1, 1000));
  cmd->add_option("--acceptance", o->acceptance, "acceptance rates to price")->delimiter(',')->capture_default_str();
  cmd->add_option("--json", o->json_out, "write results as JSON");
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
