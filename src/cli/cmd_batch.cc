// `exactly batch`: runs a JSONL file of OpenAI completions requests through
// the batched engine and writes one result line per request, in input order.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <sstream>
#include <thread>

#include <nlohmann/json.hpp>

#include "cli/commands.h"
#include "cli/common.h"
#include "cli/progress_bar.h"
#include "core/error.h"
#include "core/format.h"
#include "engine/engine.h"
#include "server/openai_request.h"
#include "server/request_body.h"
#include "server/request_fields.h"
#include "server/structured_output.h"
#include "server/generation_request.h"

namespace exactly::cli {

using server::FinishedCompletion;
using server::completion_result_json;
using server::parse_completion_request;

namespace {

using nlohmann::json;
using Clock = std::chrono::steady_clock;

struct BatchOptions {
  ModelOptions model;
  EngineConfig engine;
  std::string input;
  std::string output;
  std::string stats;
};

struct Pending {
  size_t line_index = 0;
  bool logprobs = false;
  std::vector<FinishedCompletion> choices;
  std::vector<std::optional<TokenLogprobs>> prompt_logprobs;  // when the request asked for them
  double arrival = 0;  // seconds after the start; the latencies below count from here
  double first_token = -1, finished = -1;
  double last_token = -1;
  std::vector<double> gaps;  // seconds between consecutive token arrivals (all completions)
};

double percentile(std::vector<double> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  double pos = q * static_cast<double>(v.size() - 1);
  size_t lo = static_cast<size_t>(pos);
  size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

json summary(const std::vector<double>& v) {
  double mean = 0;
  for (double x : v) mean += x;
  mean = v.empty() ? 0 : mean / static_cast<double>(v.size());
  return {{"mean", mean}, {"median", percentile(v, 0.5)}, {"p99", percentile(v, 0.99)}};
}

// A line takes the completions endpoint's fields, and "arrival"; any other
// field is refused by name rather than ignored.
void check_batch_fields(const json& body, const std::string& where) {
  json fields = body;
  fields.erase("arrival");
  try {
    server::check_fields(server::Endpoint::kCompletions, fields);
  } catch (const server::RequestError& e) {
    throw server::RequestError(where + ": " + e.what(), e.param());
  }
}

void run(BatchOptions& o) {
  o.engine.threads = o.model.threads;
  LoadedModel m = load_model(o.model.model, true, o.model.load_options());
  const Tokenizer& tok = *m.tokenizer;

  std::ifstream in(o.input);
  if (!in) throw Error(strformat("cannot open %s", o.input.c_str()), ExitCode::kBadInput);
  std::vector<RequestParams> requests;
  std::unique_ptr<GrammarCache> grammars;  // made when a request asks for a grammar
  std::vector<double> arrivals;  // seconds after the start at which each request is submitted
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
    const std::string where = strformat("%s:%zu", o.input.c_str(), n);
    json body;
    try {
      body = server::parse_request_body(line);
    } catch (const server::RequestError& e) {
      throw Error(strformat("%s: invalid JSON (%s)", where.c_str(), e.what()), ExitCode::kBadInput);
    }
    check_batch_fields(body, where);
    requests.push_back(parse_completion_request(body, tok, m.config().vocab_size, where));
    if (server::asks_for_structure(body) && !grammars && GrammarCache::available())
      grammars = std::make_unique<GrammarCache>(tok, m.config().vocab_size, server::kGrammarCacheBytes);
    requests.back().constraint =
        server::parse_request_constraint(line, body, requests.back().ignore_eos, grammars.get(), where);
    // "arrival" (seconds, not an OpenAI field) delays a request, to measure
    // how running requests fare when new work arrives.
    double arrival = 0;
    if (auto a = body.find("arrival"); a != body.end() && !a->is_null()) {
      if (!a->is_number() || a->get<double>() < 0)
        throw Error(where + ": field 'arrival' must be a non-negative number of seconds", ExitCode::kBadInput);
      arrival = a->get<double>();
    }
    arrivals.push_back(arrival);
  }

  Engine engine(m, o.engine);
  const auto t0 = Clock::now();
  auto now = [&] { return std::chrono::duration<double>(Clock::now() - t0).count(); };
  std::unordered_map<ClientRequestId, Pending> pending;
  std::vector<size_t> order(requests.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&](size_t a, size_t b) { return arrivals[a] < arrivals[b]; });
  size_t submitted = 0;
  auto submit_due = [&] {
    for (; submitted < order.size() && arrivals[order[submitted]] <= now(); ++submitted) {
      const size_t i = order[submitted];
      ClientRequestId id;
      try {
        id = engine.add_request(requests[i]);
      } catch (const Error& e) {
        throw Error(strformat("%s: request %zu: %s", o.input.c_str(), i, e.what()), ExitCode::kBadInput);
      }
      Pending p;
      p.line_index = i;
      p.logprobs = requests[i].logprobs >= 0;
      p.choices.resize(static_cast<size_t>(requests[i].n));
      p.arrival = now();
      pending.emplace(id, std::move(p));
    }
  };
  submit_due();

  std::vector<json> results(requests.size());
  ProgressBar bar("batch", static_cast<int64_t>(requests.size()));
  size_t done = 0;
  double live_slot_sum = 0, slot_sum = 0;
  int32_t peak_used_blocks = 0;
  while (engine.has_unfinished() || submitted < order.size()) {
    submit_due();
    if (!engine.has_unfinished()) {
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
      continue;
    }
    std::vector<RequestOutput> outs = engine.step();
    KVCacheStats kv = engine.kv_stats();
    peak_used_blocks = std::max(peak_used_blocks, kv.used_blocks);
    live_slot_sum += static_cast<double>(kv.reserved_tokens);
    slot_sum += static_cast<double>(kv.used_slots);
    for (RequestOutput& out : outs) {
      Pending& p = pending.at(out.id);
      if (std::any_of(out.completions.begin(), out.completions.end(),
                      [](const CompletionDelta& d) { return !d.token_ids.empty(); })) {
        const double t = now() - p.arrival;
        if (p.first_token < 0) p.first_token = t;
        if (p.last_token >= 0) p.gaps.push_back(t - p.last_token);
        p.last_token = t;
      }
      if (!out.prompt_logprobs.empty()) p.prompt_logprobs = std::move(out.prompt_logprobs);
      for (CompletionDelta& d : out.completions) {
        FinishedCompletion& c = p.choices[static_cast<size_t>(d.index)];
        c.text += d.text;
        c.token_ids.insert(c.token_ids.end(), d.token_ids.begin(), d.token_ids.end());
        c.logprobs.insert(c.logprobs.end(), d.logprobs.begin(), d.logprobs.end());
        if (d.finish_reason) c.finish_reason = to_string(*d.finish_reason);
      }
      if (out.finished) {
        p.finished = now() - p.arrival;
        results[p.line_index] = completion_result_json(p.line_index, p.choices, out, p.logprobs, p.prompt_logprobs, tok);
        double max_gap = 0, sum_gap = 0;
        for (double g : p.gaps) {
          max_gap = std::max(max_gap, g);
          sum_gap += g;
        }
        results[p.line_index]["metrics"] = {
            {"time_to_first_token", p.first_token},
            {"end_to_end", p.finished},
            {"inter_token_latency_mean", p.gaps.empty() ? 0.0 : sum_gap / static_cast<double>(p.gaps.size())},
            {"inter_token_latency_max", max_gap}};
        ++done;
      }
    }
    bar.update(static_cast<int64_t>(done), strformat("running %zu waiting %zu", engine.num_running(), engine.num_waiting()));
  }
  bar.finish();
  const double elapsed = now();

  std::ostringstream text;
  for (const json& r : results) text << r.dump(-1, ' ', false, json::error_handler_t::replace) << '\n';
  if (o.output == "-") {
    std::fwrite(text.str().data(), 1, text.str().size(), stdout);
  } else {
    std::ofstream out(o.output);
    if (!out) throw Error(strformat("cannot write %s", o.output.c_str()));
    out << text.str();
  }

  const EngineStats& s = engine.stats();
  std::vector<double> ttft, e2e;
  int64_t prompt_tokens = 0;
  for (const auto& [id, p] : pending) {
    ttft.push_back(p.first_token);
    e2e.push_back(p.finished);
  }
  for (const auto& r : requests) prompt_tokens += static_cast<int64_t>(r.prompt.size());
  const KVCacheStats kv = engine.kv_stats();
  json stats = {
      {"requests", requests.size()},
      {"elapsed_seconds", elapsed},
      {"prompt_tokens", prompt_tokens},
      {"prompt_tokens_computed", s.prompt_tokens_computed},
      {"generated_tokens", s.generated_tokens},
      {"output_tokens_per_second", static_cast<double>(s.generated_tokens) / elapsed},
      {"total_tokens_per_second", static_cast<double>(s.generated_tokens + prompt_tokens) / elapsed},
      {"requests_per_second", static_cast<double>(requests.size()) / elapsed},
      {"time_to_first_token_seconds", summary(ttft)},
      {"end_to_end_latency_seconds", summary(e2e)},
      {"steps", s.steps},
      {"forward_seconds", s.forward_seconds},
      {"decode_only_steps", s.decode_only_steps},
      {"spec_drafted_tokens", s.spec_drafted_tokens},
      {"spec_accepted_tokens", s.spec_accepted_tokens},
      {"spec_acceptance_rate",
       s.spec_drafted_tokens > 0 ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_drafted_tokens) : 0.0},
      {"spec_mean_accepted_length",
       s.spec_verifies > 0 ? static_cast<double>(s.spec_accepted_tokens) / static_cast<double>(s.spec_verifies) : 0.0},
      {"spec_draft_seconds", s.spec_draft_seconds},
      {"spec_draft_pass_tokens", s.spec_draft_pass_tokens},
      {"spec_probe_drafted_tokens", s.spec_probe_drafted_tokens},
      {"spec_probe_accepted_tokens", s.spec_probe_accepted_tokens},
      {"decode_only_tokens_per_second",
       s.decode_only_seconds > 0 ? static_cast<double>(s.decode_only_tokens) / s.decode_only_seconds : 0.0},
      {"preemptions", s.preemptions},
      {"peak_running", s.peak_running},
      {"kv_blocks_total", kv.total_blocks},
      {"kv_block_size", engine.config().block_size},
      {"kv_peak_used_blocks", peak_used_blocks},
      {"kv_live_slot_fraction", slot_sum > 0 ? live_slot_sum / slot_sum : 0.0},
      {"prefix_cache_hit_rate",
       kv.prefix_query_tokens > 0 ? static_cast<double>(kv.prefix_hit_tokens) / static_cast<double>(kv.prefix_query_tokens) : 0.0},
      {"threads", engine.config().threads},
  };
  std::fprintf(stderr, "%zu requests in %.2f s: %.1f output tokens/s, %.1f total tokens/s, %lld preemptions\n",
               requests.size(), elapsed, stats["output_tokens_per_second"].get<double>(),
               stats["total_tokens_per_second"].get<double>(), static_cast<long long>(s.preemptions));
  if (!o.stats.empty()) {
    std::ofstream out(o.stats);
    if (!out) throw Error(strformat("cannot write %s", o.stats.c_str()));
    out << stats.dump(2) << '\n';
  }
}

}  // namespace

void register_batch(CLI::App& app) {
  auto o = std::make_shared<BatchOptions>();
  CLI::App* cmd = app.add_subcommand("batch", "run a JSONL file of completions requests through the batched engine");
  add_model_options(*cmd, o->model);
  add_engine_options(*cmd, o->engine);
  cmd->add_option("-i,--input", o->input, "JSONL file, one OpenAI completions request per line")->required();
  cmd->add_option("-o,--output", o->output, "JSONL results, one line per request in input order (- for stdout)")
      ->required();
  cmd->add_option("--stats", o->stats, "write throughput, latency and KV statistics as JSON");
  cmd->callback([o] { run(*o); });
}

}  // namespace exactly::cli
