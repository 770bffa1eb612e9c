#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <unordered_map>

#include "core/check.h"

namespace exactly {

namespace {

uint64_t seed_of(const SamplingParams& p) {
  if (p.seed) return *p.seed;
  std::random_device rd;
  return (static_cast<uint64_t>(rd()) << 32) ^ rd();
}

}  // namespace

int32_t argmax(std::span<const float> v) {
  EXACTLY_CHECK(!v.empty());
  size_t best = 0;
  for (size_t i = 1; i < v.size(); ++i)
    if (v[i] > v[best]) best = i;
  return static_cast<int32_t>(best);
}

Sampler::Sampler(const SamplingParams& params) : params_(params), rng_(seed_of(params)) {}

namespace {

bool penalised(const SamplingParams& p, size_t context_size, size_t num_prompt) {
  return (p.repetition_penalty != 1.0f && p.repetition_window != 0 && context_size > 0) ||
         ((p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) && num_prompt < context_size);
}

}  // namespace

bool Sampler::plain_greedy(size_t context_size, size_t num_prompt) const {
  return params_.greedy() && !penalised(params_, context_size, num_prompt);
}

std::vector<PenalisedToken> Sampler::penalised_tokens(std::span<const int32_t> history, size_t num_prompt) const {
  const SamplingParams& p = params_;
  std::vector<PenalisedToken> out;
  std::unordered_map<int32_t, size_t> at;  // id -> index in out
  auto entry = [&](int32_t id) -> PenalisedToken& {
    auto [it, fresh] = at.try_emplace(id, out.size());
    if (fresh) out.push_back({id, 0, false});
    return out[it->second];
  };
  if (p.repetition_penalty != 1.0f && !history.empty() && p.repetition_window != 0) {
    const size_t start = p.repetition_window > 0 && history.size() > static_cast<size_t>(p.repetition_window)
                             ? history.size() - static_cast<size_t>(p.repetition_window)
                             : 0;
    for (size_t i = start; i < history.size(); ++i) entry(history[i]).in_window = true;
  }
  if ((p.frequency_penalty != 0.0f || p.presence_penalty != 0.0f) && num_prompt < history.size())
    for (size_t i = num_prompt; i < history.size(); ++i) entry(history[i]).output_count++;
  return out;
}

std::vector<TokenProb> Sampler::distribution(std::span<const float> logits, std::span<const int32_t> history,
                                             size_t num_prompt) const {
  std::vector<TokenProb> out;
  distribution_into(logits, history, num_prompt, out);
  return out;
}

void Sampler::distribution_into(std::span<const float> logits, std::span<const int32_t> history, size_t num_prompt,
                                std::vector<TokenProb>& out) const {
  if (plain_greedy(history.size(), num_prompt)) {  // the common greedy case needs no copy of the vocabulary
    const int32_t best = argmax(logits);
    out.assign(1, TokenProb{best, logits[static_cast<size_t>(best)], 1.0});
    return;
  }
  fill_distribution(logits, penalised_tokens(history, num_prompt), out);
}

std::vector<TokenProb> Sampler::distribution_with(std::span<const float> logits,
                                                  std::span<const PenalisedToken> penalised) const {
  std::vector<TokenProb> out;
  fill_distribution(logits, penalised, out);
  return out;
}

void Sampler::fill_distribution(std::span<const float> logits, std::span<const PenalisedToken> penalised,
                                std::vector<TokenProb>& cand) const {
  const SamplingParams& p = params_;
  constexpr float kMinusInf = -std::numeric_limits<float>::infinity();
  cand.resize(logits.size());
  size_t num_minus_inf = 0;
  for (size_t i = 0; i < logits.size(); ++i) {
    cand[i] = {static_cast<int32_t>(i), logits[i], 0.0};
    num_minus_inf += logits[i] == kMinusInf ? 1 : 0;
  }

  // Repetition penalty (as in CTRL): shrink positive logits, grow negative
  // ones. Frequency and presence penalties (as in the OpenAI API) over the
  // output.
  for (const PenalisedToken& t : penalised) {
    if (t.id < 0 || static_cast<size_t>(t.id) >= cand.size()) continue;
    float& l = cand[static_cast<size_t>(t.id)].logit;
    if (t.in_window) l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    // One fused multiply-add, spelled out: what a compiler may contract
    // differs between builds, and a device sampling the row must match.
    if (t.output_count > 0) l -= std::fma(p.frequency_penalty, static_cast<float>(t.output_count), p.presence_penalty);
  }

  // Tokens at -inf (a draft head over some of the vocabulary leaves the rest
  // there, model/config.h) have probability exactly 0: dropping them changes
  // no probability and no draw, and spares the rest of the work a
  // vocabulary-sized list. Penalties keep -inf at -inf, so this may follow them.
  if (num_minus_inf > 0 && num_minus_inf < cand.size())
    std::erase_if(cand, [&](const TokenProb& c) { return c.logit == kMinusInf; });

  if (p.greedy()) {
    size_t best = 0;
    for (size_t i = 1; i < cand.size(); ++i)
      if (cand[i].logit > cand[best].logit) best = i;
    const TokenProb top{cand[best].id, cand[best].logit, 1.0};
    cand.assign(1, top);
    return;
  }

  for (auto& c : cand) c.logit /= p.temperature;
  // Sort by logit, ties by id, so the order (and hence the draw) is deterministic.
  auto by_logit = [](const TokenProb& a, const TokenProb& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t keep = cand.size();
  const bool sorted = p.top_k > 0 || p.top_p < 1.0f;
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = static_cast<size_t>(p.top_k);
    std::partial_sort(cand.begin(), cand.begin() + static_cast<ptrdiff_t>(keep), cand.end(), by_logit);
    cand.resize(keep);
  } else if (sorted) {
    std::sort(cand.begin(), cand.end(), by_logit);
  }
  // Without top-k or top-p no order is needed: the candidates stay in id
  // order (sorting 49k logits per token would cost more than the draw).

  // Softmax in double over the survivors.
  float max_logit_f = cand.front().logit;
  for (const auto& c : cand) max_logit_f = std::max(max_logit_f, c.logit);
  const double max_logit = max_logit_f;
  double sum = 0;
  for (auto& c : cand) sum += (c.p = std::exp(static_cast<double>(c.logit) - max_logit));
  for (auto& c : cand) c.p /= sum;

  // top-p: the smallest prefix whose mass reaches top_p.
  if (p.top_p < 1.0f) {
    double mass = 0;
    size_t n = 0;
    while (n < cand.size()) {
      mass += cand[n++].p;
      if (mass >= p.top_p) break;
    }
    cand.resize(std::max<size_t>(1, n));
  }
  // min-p: drop tokens below min_p times the most likely one.
  if (p.min_p > 0.0f) {
    double best = 0;
    for (const auto& c : cand) best = std::max(best, c.p);
    const double floor = best * p.min_p;
    std::erase_if(cand, [&](const TokenProb& c) { return c.p < floor; });
  }
  double total = 0;
  for (auto& c : cand) total += c.p;
  for (auto& c : cand) c.p /= total;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history, size_t num_prompt) {
  std::vector<TokenProb> dist = distribution(logits, history, num_prompt);
  if (params_.greedy()) return dist.front().id;
  return draw(dist, rng_.uniform());
}

int32_t Sampler::draw(std::span<const TokenProb> dist, double u) {
  EXACTLY_CHECK(!dist.empty());
  // The last candidate absorbs rounding in the cumulative sum.
  for (const auto& c : dist) {
    if (u < c.p) return c.id;
    u -= c.p;
  }
  return dist.back().id;
}

TokenLogprobs compute_logprobs(std::span<const float> logits, int32_t chosen, int top_n) {
  EXACTLY_CHECK(chosen >= 0 && static_cast<size_t>(chosen) < logits.size());
  float mx = logits[0];
  for (float l : logits) mx = std::max(mx, l);
  double sum = 0;
  for (float l : logits) sum += std::exp(static_cast<double>(l) - mx);
  const double log_z = std::log(sum) + mx;
  const float mine = logits[static_cast<size_t>(chosen)];
  int32_t above = 0;
  for (float l : logits) above += l > mine ? 1 : 0;
  TokenLogprobs out{chosen, static_cast<double>(mine) - log_z, {}, above + 1};
  if (top_n > 0) {
    std::vector<int32_t> idx(logits.size());
    for (size_t i = 0; i < idx.size(); ++i) idx[i] = static_cast<int32_t>(i);
    const size_t n = std::min(idx.size(), static_cast<size_t>(top_n));
    std::partial_sort(idx.begin(), idx.begin() + static_cast<ptrdiff_t>(n), idx.end(), [&](int32_t a, int32_t b) {
      return logits[static_cast<size_t>(a)] > logits[static_cast<size_t>(b)] ||
             (logits[static_cast<size_t>(a)] == logits[static_cast<size_t>(b)] && a < b);
    });
    for (size_t i = 0; i < n; ++i)
      out.top.push_back({idx[i], static_cast<double>(logits[static_cast<size_t>(idx[i])]) - log_z});
  }
  return out;
}

}  // namespace exactly
