// `exactly verify`: proves on the user's own model and device that a
// request's bits never depend on how the engine runs it. Target requests
// (greedy, seeded sampling with n = 2, a long prompt; random token ids from a
// fixed seed) run alone, then among others, under prefill chunks of 1, 7 and
// 64 tokens and one whole pass, after a prefix-cache hit, under preemption and
// with speculation; every token, logprob and top alternative must be the same
// bits. Then the sampler against the scorer: each generated token's logprob
// must equal its logprob when the text comes back as a prompt. Exit 0 only
// when everything is identical.
#include <algorithm>
#include <cstdio>
#include <fstream>
#include <memory>
#include <random>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/verify_runs.h"
#include "core/error.h"
#include "core/format.h"

namespace exactly::cli {
namespace {

struct VerifyOptions {
  ModelOptions model;
  EngineConfig engine;
  int fillers = 31;
  int32_t context = 4096;  // the engine's context (at most the model's): caps the targets' prompts
  uint64_t seed = 20261203;
  std::string json;
  bool perturb = false;  // a test of verify itself: the crowd run must then differ
};

struct Check {
  std::string name;
  bool ok = false;
  std::string detail;
};

std::vector<int32_t> random_ids(std::mt19937_64& rng, int32_t vocab, int64_t n) {
  std::uniform_int_distribution<int32_t> id(std::min(100, vocab - 1), vocab - 1);
  std::vector<int32_t> out(static_cast<size_t>(n));
  for (auto& t : out) t = id(rng);
  return out;
}

// The targets, their prompts cut to what the context holds.
std::vector<RequestParams> make_targets(std::mt19937_64& rng, int32_t vocab, int32_t context) {
  auto capped = [&](int64_t n, int64_t max_tokens) { return std::max<int64_t>(1, std::min(n, context - max_tokens)); };
  std::vector<RequestParams> t(3);
  const std::vector<int32_t> motif = random_ids(rng, vocab, 12);  // repeated: prompt lookup finds drafts
  for (int i = 0; i < 3; ++i) t[0].prompt.insert(t[0].prompt.end(), motif.begin(), motif.end());
  t[0].prompt.resize(static_cast<size_t>(capped(static_cast<int64_t>(t[0].prompt.size()), 24)));
  t[0].max_tokens = 24;
  t[0].logprobs = 3;
  t[0].sampling.temperature = 0.0f;
  t[1].prompt = random_ids(rng, vocab, capped(181, 24));
  t[1].max_tokens = 24;
  t[1].n = 2;
  t[1].logprobs = 3;
  t[1].sampling.temperature = 0.9f;
  t[1].sampling.top_p = 0.95f;
  t[1].sampling.seed = 7;
  t[2].prompt = random_ids(rng, vocab, capped(700, 16));
  t[2].max_tokens = 16;
  t[2].logprobs = 2;
  t[2].sampling.temperature = 0.0f;
  for (auto& r : t) {
    r.ignore_eos = true;
    r.max_tokens = std::min<int64_t>(r.max_tokens, context - static_cast<int64_t>(r.prompt.size()));
  }
  return t;
}

std::vector<RequestParams> make_fillers(std::mt19937_64& rng, int32_t vocab, int32_t context, int count) {
  const int64_t lengths[] = {3, 9, 30, 77, 150, 300, 600};
  std::vector<RequestParams> out;
  for (int i = 0; i < count; ++i) {
    RequestParams r;
    r.prompt = random_ids(rng, vocab, std::min<int64_t>(lengths[rng() % 7], context / 2));
    r.max_tokens = 16 + static_cast<int64_t>(rng() % 33);  // long enough to outgrow their blocks
    r.ignore_eos = true;
    r.sampling.temperature = i % 3 == 0 ? 0.0f : 0.8f;
    r.sampling.seed = 1000 + static_cast<uint64_t>(i);
    out.push_back(std::move(r));
  }
  return out;
}

std::vector<std::vector<RequestParams>> one_per_phase(const std::vector<RequestParams>& reqs) {
  std::vector<std::vector<RequestParams>> phases;
  for (const auto& r : reqs) phases.push_back({r});
  return phases;
}

// `got[pick[i]]` against `want[i]` for every target.
Check compare(const std::string& name, const std::vector<Outcome>& want, const std::vector<Outcome>& got,
              const std::vector<size_t>& pick) {
  for (size_t i = 0; i < want.size(); ++i)
    if (auto d = first_difference(want[i], got[pick[i]]))
      return {name, false, strformat("request %zu: %s", i, d->c_str())};
  return {name, true, ""};
}

std::vector<size_t> first_n(size_t n, size_t from = 0) {
  std::vector<size_t> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = from + i;
  return v;
}

// Each generated token's logprob (and alternatives) against the same token
// scored as part of a prompt, in chunks of 7.
Check sampler_against_scorer(LoadedModel& m, EngineConfig config, const std::vector<RequestParams>& targets,
                             const std::vector<Outcome>& generated) {
  std::vector<RequestParams> texts;
  std::vector<std::pair<size_t, size_t>> origin;  // (target, choice)
  for (size_t i = 0; i < targets.size(); ++i)
    for (size_t c = 0; c < generated[i].tokens.size(); ++c) {
      RequestParams r;
      r.prompt = targets[i].prompt;
      r.prompt.insert(r.prompt.end(), generated[i].tokens[c].begin(), generated[i].tokens[c].end());
      if (static_cast<int32_t>(r.prompt.size()) >= config.max_model_len && config.max_model_len > 0) continue;
      r.max_tokens = 1;
      r.prompt_logprobs = targets[i].logprobs;
      texts.push_back(std::move(r));
      origin.push_back({i, c});
    }
  config.max_num_batched_tokens = 7;
  const RunResult scored = run_phases(m, config, {texts});
  int64_t compared = 0;
  for (size_t j = 0; j < texts.size(); ++j) {
    const auto [i, c] = origin[j];
    const size_t n_prompt = targets[i].prompt.size();
    const auto& lps = generated[i].logprobs[c];
    for (size_t k = 0; k < lps.size(); ++k) {
      const auto& s = scored.outcomes[j].prompt_logprobs.at(n_prompt + k);
      Outcome a, b;  // one token each, compared with the same rule as whole outcomes
      a.tokens = b.tokens = {{lps[k].id}};
      a.logprobs = {{lps[k]}};
      b.logprobs = {{s.value_or(TokenLogprobs{-1, 0, {}})}};
      if (first_difference(a, b))
        return {"sampler == scorer", false, strformat("target %zu choice %zu token %zu", i, c, k)};
      ++compared;
    }
  }
  return {"sampler == scorer", compared > 0, strformat("%lld tokens", static_cast<long long>(compared))};
}

std::vector<Check> run_checks(LoadedModel& m, const VerifyOptions& o) {
  const int32_t vocab = m.config().vocab_size;
  EngineConfig base = o.engine;
  base.threads = o.model.threads;
  const int32_t context = std::min(o.context, m.config().context_length);
  base.max_model_len = context;
  std::mt19937_64 rng(o.seed);
  const std::vector<RequestParams> targets = make_targets(rng, vocab, context);
  const std::vector<RequestParams> fillers = make_fillers(rng, vocab, context, o.fillers);
  const size_t n = targets.size();
  std::vector<Check> checks;
  // On the CPU an unset cache would be 2 GiB a run: size it for the crowd.
  if (base.kv_cache_memory <= 0 && std::string(m.model->device()) == "cpu") {
    int64_t tokens = 0;
    for (const auto& r : fillers) tokens += static_cast<int64_t>(r.prompt.size()) + r.max_tokens;
    for (const auto& r : targets) tokens += 2 * (static_cast<int64_t>(r.prompt.size()) + r.max_tokens * r.n);
    base.kv_cache_memory = (tokens + 64 * int64_t{base.block_size}) * m.model->kv_bytes_per_slot();
  }

  EngineConfig plain = base;
  plain.enable_prefix_caching = false;
  const std::vector<Outcome> alone = run_phases(m, plain, one_per_phase(targets)).outcomes;

  // Among others, shuffled: the targets end up at positions `where`.
  std::vector<RequestParams> crowd = fillers;
  crowd.insert(crowd.end(), targets.begin(), targets.end());
  std::vector<size_t> order = first_n(crowd.size());
  std::shuffle(order.begin(), order.end(), rng);
  std::vector<RequestParams> shuffled;
  std::vector<size_t> where(n);
  for (size_t i = 0; i < order.size(); ++i) {
    shuffled.push_back(crowd[order[i]]);
    if (order[i] >= fillers.size()) where[order[i] - fillers.size()] = i;
  }
  std::vector<RequestParams> crowd_run = shuffled;
  if (o.perturb) crowd_run[where[1]].sampling.seed = *targets[1].sampling.seed + 1;
  checks.push_back(compare(strformat("among %d others", o.fillers), alone,
                           run_phases(m, base, {crowd_run}).outcomes, where));

  for (int64_t chunk : {int64_t{1}, int64_t{7}, int64_t{64}, int64_t{context}}) {
    EngineConfig c = plain;
    c.max_num_batched_tokens = chunk;
    checks.push_back(compare(strformat("prefill chunks of %lld", static_cast<long long>(chunk)), alone,
                             run_phases(m, c, one_per_phase(targets)).outcomes, first_n(n)));
  }

  const RunResult twice = run_phases(m, base, {targets, targets});
  Check hit = compare("after a prefix-cache hit", alone, twice.outcomes, first_n(n, n));
  int64_t cached = 0;
  for (size_t i = n; i < 2 * n; ++i) cached += twice.outcomes[i].cached_prompt_tokens;
  if (hit.ok && cached == 0) hit = {hit.name, false, "no prompt token came from the cache"};
  checks.push_back(hit);

  // A pool that holds the longest target alone (and a block to spare), not the crowd.
  int64_t longest = 0;
  for (const auto& t : targets) longest = std::max(longest, static_cast<int64_t>(t.prompt.size()) + t.max_tokens);
  EngineConfig tight = base;
  tight.kv_cache_memory = (longest + 2 * int64_t{base.block_size}) * m.model->kv_bytes_per_slot();
  const RunResult squeezed = run_phases(m, tight, {shuffled});
  Check pre = compare("with preemption", alone, squeezed.outcomes, where);
  if (pre.ok && squeezed.stats.preemptions == 0) pre = {pre.name, false, "the small cache preempted nothing"};
  if (pre.ok) pre.detail = strformat("%lld preemptions", static_cast<long long>(squeezed.stats.preemptions));
  checks.push_back(pre);

  std::vector<RequestParams> greedy;
  std::vector<Outcome> greedy_alone;
  for (size_t i = 0; i < n; ++i)
    if (targets[i].sampling.temperature <= 0) greedy.push_back(targets[i]), greedy_alone.push_back(alone[i]);
  EngineConfig spec = plain;
  spec.spec_method = "ngram";
  spec.num_speculative_tokens = 4;
  spec.adaptive_speculation = false;
  const RunResult drafted = run_phases(m, spec, one_per_phase(greedy));
  Check sp = compare("with speculation (greedy)", greedy_alone, drafted.outcomes, first_n(greedy.size()));
  if (sp.ok && drafted.stats.spec_drafted_tokens == 0) sp = {sp.name, false, "nothing was drafted"};
  if (sp.ok) sp.detail = strformat("%lld drafts", static_cast<long long>(drafted.stats.spec_drafted_tokens));
  checks.push_back(sp);

  checks.push_back(sampler_against_scorer(m, plain, targets, alone));
  return checks;
}

void run(const VerifyOptions& o) {
  if (o.fillers < 1 || o.fillers > 1000) throw Error("--fillers must be between 1 and 1000", ExitCode::kUsage);
  if (o.context < 64) throw Error("--context must be at least 64 tokens", ExitCode::kUsage);
  LoadedModel m = load_model(o.model.model, true, o.model.load_options());
  std::printf("exactly verify: %s on %s%s\n", o.model.model.c_str(), m.model->device(),
              o.model.deterministic ? "" : " (--no-deterministic)");
  const std::vector<Check> checks = run_checks(m, o);
  int failed = 0;
  nlohmann::json report = nlohmann::json::array();
  for (const Check& c : checks) {
    std::printf("%-10s %-28s %s\n", c.ok ? "identical" : "DIFFERS", c.name.c_str(), c.detail.c_str());
    report.push_back({{"check", c.name}, {"identical", c.ok}, {"detail", c.detail}});
    failed += c.ok ? 0 : 1;
  }
  std::printf("%zu/%zu checks identical\n", checks.size() - static_cast<size_t>(failed), checks.size());
  std::fflush(stdout);
  if (!o.json.empty()) {
    std::ofstream out(o.json);
    if (!out) throw Error(strformat("cannot write %s", o.json.c_str()), ExitCode::kBadInput);
    out << report.dump(1) << '\n';
  }
  if (failed > 0) throw Error(strformat("%d of %zu checks differ", failed, checks.size()), ExitCode::kRuntime);
}

}  // namespace

void register_verify(CLI::App& app) {
  auto o = std::make_shared<VerifyOptions>();
  CLI::App* cmd = app.add_subcommand(
      "verify", "prove on this model and device that a request's bits never depend on how the engine runs it");
  add_model_options(*cmd, o->model);
  add_engine_options(*cmd, o->engine);
  cmd->add_option("--fillers", o->fillers, "other requests around the targets")->capture_default_str();
  cmd->add_option("--seed", o->seed, "seed of the random prompts")->capture_default_str();
  cmd->add_option("--context", o->context, "context of the checks' engines, in tokens (at most the model's)")
      ->capture_default_str();
  cmd->add_option("--json", o->json, "write the checks as JSON");
  cmd->add_flag("--perturb", o->perturb,
                "give a target another seed in the crowd run, which must then be reported as different (a test of "
                "verify itself)");
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
