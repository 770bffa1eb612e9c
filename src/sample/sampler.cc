#include "sample/sampler.h"

#include <algorithm>
#include <cmath>
#include <random>
#include <unordered_set>

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

std::vector<TokenProb> Sampler::distribution(std::span<const float> logits,
                                             std::span<const int32_t> history) const {
  const SamplingParams& p = params_;
  std::vector<TokenProb> cand(logits.size());
  for (size_t i = 0; i < logits.size(); ++i) cand[i] = {static_cast<int32_t>(i), logits[i], 0.0};

  // Repetition penalty (as in CTRL): shrink positive logits, grow negative ones.
  if (p.repetition_penalty != 1.0f && !history.empty()) {
    size_t start = history.size() > static_cast<size_t>(std::max(0, p.repetition_window))
                       ? history.size() - static_cast<size_t>(p.repetition_window)
                       : 0;
    std::unordered_set<int32_t> seen(history.begin() + static_cast<ptrdiff_t>(start), history.end());
    for (int32_t id : seen) {
      if (id < 0 || static_cast<size_t>(id) >= cand.size()) continue;
      float& l = cand[static_cast<size_t>(id)].logit;
      l = l > 0 ? l / p.repetition_penalty : l * p.repetition_penalty;
    }
  }

  if (p.greedy()) {
    size_t best = 0;
    for (size_t i = 1; i < cand.size(); ++i)
      if (cand[i].logit > cand[best].logit) best = i;
    return {{cand[best].id, cand[best].logit, 1.0}};
  }

  for (auto& c : cand) c.logit /= p.temperature;
  // Sort by logit, ties by id, so the order (and hence the draw) is deterministic.
  auto by_logit = [](const TokenProb& a, const TokenProb& b) {
    return a.logit > b.logit || (a.logit == b.logit && a.id < b.id);
  };
  size_t keep = cand.size();
  if (p.top_k > 0 && static_cast<size_t>(p.top_k) < keep) {
    keep = static_cast<size_t>(p.top_k);
    std::partial_sort(cand.begin(), cand.begin() + static_cast<ptrdiff_t>(keep), cand.end(), by_logit);
    cand.resize(keep);
  } else {
    std::sort(cand.begin(), cand.end(), by_logit);
  }

  // Softmax in double over the survivors.
  const double max_logit = cand.front().logit;
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
    const double floor = cand.front().p * p.min_p;
    size_t n = 1;
    while (n < cand.size() && cand[n].p >= floor) ++n;
    cand.resize(n);
  }
  double total = 0;
  for (auto& c : cand) total += c.p;
  for (auto& c : cand) c.p /= total;
  return cand;
}

int32_t Sampler::sample(std::span<const float> logits, std::span<const int32_t> history) {
  std::vector<TokenProb> dist = distribution(logits, history);
  if (dist.size() == 1) return dist.front().id;
  // Inverse-CDF draw; the last candidate absorbs rounding in the cumulative sum.
  double u = rng_.uniform();
  for (const auto& c : dist) {
    if (u < c.p) return c.id;
    u -= c.p;
  }
  return dist.back().id;
}

}  // namespace exactly
