// `exactly bench model`: prompt processing (ppN) and generation (tgN) speed,
// measured as llama-bench measures them so the figures compare: ppN evaluates
// N prompt tokens in one pass from an empty context; tgN generates N tokens
// one at a time; each test is repeated and reported as mean ± stddev.
#include <chrono>
#include <cmath>
#include <cstdio>
#include <numeric>

#include "cli/commands.h"
#include "cli/common.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/generator.h"
#include "engine/loaded_model.h"
#include "sample/rng.h"

namespace exactly::cli {

namespace {

struct BenchOptions {
  ModelOptions model;
  std::vector<int> threads;
  std::vector<int> n_prompt = {512};
  std::vector<int> n_gen = {128};
  int repetitions = 5;
  bool json = false;
};

struct Result {
  std::string test;
  int threads;
  double mean, stddev;  // tokens per second
};

std::vector<int32_t> random_tokens(int n, int32_t vocab, uint64_t seed) {
  Rng rng(seed);
  std::vector<int32_t> t(static_cast<size_t>(n));
  for (auto& x : t) x = static_cast<int32_t>(rng.next() % static_cast<uint64_t>(vocab));
  return t;
}

Result measure(LoadedModel& m, int threads, int n_prompt, int n_gen, int reps) {
  ThreadPool pool(threads);
  const int32_t vocab = m.config().vocab_size;
  const int ctx = std::max(n_prompt, n_gen);
  Generator gen(*m.model, pool, ctx, std::max(n_prompt, 1));
  auto run_once = [&](uint64_t seed) {
    gen.reset();
    auto t0 = std::chrono::steady_clock::now();
    if (n_prompt > 0) {
      gen.feed(random_tokens(n_prompt, vocab, seed));
    } else {
      auto toks = random_tokens(n_gen, vocab, seed);
      for (int i = 0; i < n_gen; ++i) gen.feed(std::span<const int32_t>(&toks[static_cast<size_t>(i)], 1));
    }
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  };
  run_once(0);  // warm-up, as llama-bench does
  std::vector<double> rates;
  for (int r = 0; r < reps; ++r) rates.push_back((n_prompt > 0 ? n_prompt : n_gen) / run_once(static_cast<uint64_t>(r + 1)));
  double mean = std::accumulate(rates.begin(), rates.end(), 0.0) / static_cast<double>(rates.size());
  double var = 0;
  for (double x : rates) var += (x - mean) * (x - mean);
  double sd = rates.size() > 1 ? std::sqrt(var / static_cast<double>(rates.size() - 1)) : 0.0;
  return {n_prompt > 0 ? strformat("pp%d", n_prompt) : strformat("tg%d", n_gen), threads, mean, sd};
}

void run(BenchOptions& o) {
  LoadedModel m = load_model(o.model.model, true, o.model.load_options());
  if (!m.file)  // dummy weights, a Hugging Face checkpoint: no GGUF tensors to report
    throw Error("bench model measures a GGUF file; use bench throughput for other checkpoints", ExitCode::kUsage);
  if (o.threads.empty()) o.threads = {o.model.resolved_threads()};
  uint64_t bytes = 0;
  int64_t params = 0;
  for (const auto& t : m.file->tensors()) {
    bytes += t.nbytes;
    params += t.num_elements();
  }
  std::vector<Result> results;
  if (!o.json) {
    std::printf("| model | size | params | threads | test | t/s |\n");
    std::printf("| --- | ---: | ---: | ---: | ---: | ---: |\n");
  }
  for (int th : o.threads) {
    std::vector<std::pair<int, int>> tests;
    for (int p : o.n_prompt) if (p > 0) tests.push_back({p, 0});
    for (int g : o.n_gen) if (g > 0) tests.push_back({0, g});
    for (auto [p, g] : tests) {
      Result r = measure(m, th, p, g, o.repetitions);
      results.push_back(r);
      if (!o.json) {
        std::printf("| %s | %s | %.2f M | %d | %s | %.2f ± %.2f |\n", m.config().name.c_str(),
                    human_bytes(static_cast<double>(bytes)).c_str(), static_cast<double>(params) / 1e6, th,
                    r.test.c_str(), r.mean, r.stddev);
        std::fflush(stdout);
      }
    }
  }
  if (o.json) {
    std::printf("[");
    for (size_t i = 0; i < results.size(); ++i)
      std::printf("%s{\"test\": \"%s\", \"threads\": %d, \"tokens_per_second\": %.3f, \"stddev\": %.3f}",
                  i ? ", " : "", results[i].test.c_str(), results[i].threads, results[i].mean, results[i].stddev);
    std::printf("]\n");
  }
}

}  // namespace

void register_bench(CLI::App& app) {
  CLI::App* bench = app.add_subcommand("bench", "benchmarks");
  bench->require_subcommand(1);
  auto o = std::make_shared<BenchOptions>();
  CLI::App* cmd = bench->add_subcommand("model", "prompt processing and generation speed (as llama-bench)");
  add_model_options(*cmd, o->model);
  cmd->add_option("--threads-list", o->threads, "thread counts to test (default: -t)")->delimiter(',');
  cmd->add_option("-p,--n-prompt", o->n_prompt, "prompt lengths to test (0 to skip)")->delimiter(',')->capture_default_str();
  cmd->add_option("-n,--n-gen", o->n_gen, "generation lengths to test (0 to skip)")->delimiter(',')->capture_default_str();
  cmd->add_option("-r,--repetitions", o->repetitions, "repetitions of each test")->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_flag("--json", o->json, "print results as JSON");
  cmd->callback([o] { run(*o); });
  register_bench_kv(*bench);
  register_bench_serve(*bench);
  register_bench_throughput(*bench);
  register_bench_spec_cost(*bench);
  register_bench_grammar(*bench);
}

}  // namespace exactly::cli
