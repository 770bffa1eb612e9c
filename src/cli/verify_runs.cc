#include "cli/verify_runs.h"

#include <cstring>
#include <unordered_map>

#include "core/format.h"

namespace exactly::cli {

namespace {

bool same_bits(double a, double b) { return std::memcmp(&a, &b, sizeof a) == 0; }

bool same_logprobs(const TokenLogprobs& a, const TokenLogprobs& b) {
  if (a.id != b.id || !same_bits(a.logprob, b.logprob) || a.rank != b.rank || a.top.size() != b.top.size())
    return false;
  for (size_t i = 0; i < a.top.size(); ++i)
    if (a.top[i].first != b.top[i].first || !same_bits(a.top[i].second, b.top[i].second)) return false;
  return true;
}

}  // namespace

std::optional<std::string> first_difference(const Outcome& a, const Outcome& b) {
  if (a.tokens.size() != b.tokens.size()) return std::string("the number of choices");
  for (size_t c = 0; c < a.tokens.size(); ++c) {
    const auto& ta = a.tokens[c];
    const auto& tb = b.tokens[c];
    for (size_t i = 0; i < std::min(ta.size(), tb.size()); ++i)
      if (ta[i] != tb[i]) return strformat("token %zu of choice %zu", i, c);
    if (ta.size() != tb.size()) return strformat("the length of choice %zu", c);
    for (size_t i = 0; i < std::min(a.logprobs[c].size(), b.logprobs[c].size()); ++i)
      if (!same_logprobs(a.logprobs[c][i], b.logprobs[c][i]))
        return strformat("logprobs of token %zu of choice %zu", i, c);
  }
  if (a.prompt_logprobs.size() != b.prompt_logprobs.size()) return std::string("the number of prompt logprobs");
  for (size_t i = 0; i < a.prompt_logprobs.size(); ++i) {
    const auto& pa = a.prompt_logprobs[i];
    const auto& pb = b.prompt_logprobs[i];
    if (pa.has_value() != pb.has_value() || (pa && !same_logprobs(*pa, *pb)))
      return strformat("the logprob of prompt token %zu", i);
  }
  return std::nullopt;
}

RunResult run_phases(LoadedModel& model, const EngineConfig& config,
                     const std::vector<std::vector<RequestParams>>& phases) {
  Engine engine(model, config);
  RunResult result;
  for (const auto& phase : phases) {
    std::unordered_map<ClientRequestId, size_t> index;
    for (const RequestParams& p : phase) {
      index[engine.add_request(p)] = result.outcomes.size();
      Outcome o;
      o.tokens.resize(static_cast<size_t>(p.n));
      o.logprobs.resize(static_cast<size_t>(p.n));
      result.outcomes.push_back(std::move(o));
    }
    while (engine.has_unfinished()) {
      for (RequestOutput& out : engine.step()) {
        Outcome& o = result.outcomes[index.at(out.id)];
        o.cached_prompt_tokens = std::max(o.cached_prompt_tokens, out.cached_prompt_tokens);
        if (!out.prompt_logprobs.empty()) o.prompt_logprobs = std::move(out.prompt_logprobs);
        for (CompletionDelta& d : out.completions) {
          auto& tokens = o.tokens[static_cast<size_t>(d.index)];
          auto& logprobs = o.logprobs[static_cast<size_t>(d.index)];
          tokens.insert(tokens.end(), d.token_ids.begin(), d.token_ids.end());
          logprobs.insert(logprobs.end(), d.logprobs.begin(), d.logprobs.end());
        }
      }
    }
  }
  result.stats = engine.stats();
  return result;
}

}  // namespace exactly::cli
