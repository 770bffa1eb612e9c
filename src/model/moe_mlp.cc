#include "model/moe_mlp.h"

#include <algorithm>
#include <cmath>
#include <cstring>

#include "model/llama_layer.h"

namespace exactly {

namespace {

template <class Vector>
void grow(Vector& v, int64_t n) {
  if (static_cast<int64_t>(v.size()) < n) v.resize(static_cast<size_t>(n));
}

// Gathers the rows routed to each expert (in token order, experts in
// increasing order) and records where each (token, choice) landed.
int64_t gather_rows(const float* h, int64_t n, int k, int n_experts, int64_t dim, MoeScratch& s,
                    std::vector<int64_t>& first_row) {
  first_row.assign(static_cast<size_t>(n_experts) + 1, 0);
  for (int64_t i = 0; i < n * k; ++i) ++first_row[static_cast<size_t>(s.chosen[static_cast<size_t>(i)]) + 1];
  for (int e = 0; e < n_experts; ++e) first_row[static_cast<size_t>(e) + 1] += first_row[static_cast<size_t>(e)];
  std::vector<int64_t> next(first_row.begin(), first_row.end() - 1);
  for (int64_t t = 0; t < n; ++t)
    for (int j = 0; j < k; ++j) {
      const auto i = static_cast<size_t>(t * k + j);
      const int64_t r = next[static_cast<size_t>(s.chosen[i])]++;
      s.row[i] = r;
      std::memcpy(s.in.data() + r * dim, h + t * dim, static_cast<size_t>(dim) * sizeof(float));
    }
  return first_row.back();
}

}  // namespace

void route_token(const float* logits, int n_experts, int k, int32_t* chosen, float* weight) {
  std::vector<int32_t> order(static_cast<size_t>(n_experts));
  for (int e = 0; e < n_experts; ++e) order[static_cast<size_t>(e)] = e;
  std::partial_sort(order.begin(), order.begin() + k, order.end(), [&](int32_t a, int32_t b) {
    return logits[a] > logits[b] || (logits[a] == logits[b] && a < b);
  });
  std::sort(order.begin(), order.begin() + k);
  double top = -INFINITY;
  for (int j = 0; j < k; ++j) top = std::max(top, static_cast<double>(logits[order[static_cast<size_t>(j)]]));
  double e[64], sum = 0;
  for (int j = 0; j < k; ++j) sum += e[j] = std::exp(static_cast<double>(logits[order[static_cast<size_t>(j)]]) - top);
  for (int j = 0; j < k; ++j) {
    chosen[j] = order[static_cast<size_t>(j)];
    weight[j] = static_cast<float>(e[j] / sum);
  }
}

void moe_mlp(const MoeWeights& w, const ModelConfig& c, const float* h, int64_t n, float* out, MoeScratch& s,
             ThreadPool& pool) {
  const int k = c.n_experts_used, n_experts = c.n_experts;
  const int64_t dim = c.dim, ffn = c.expert_ffn_dim;
  grow(s.logits, n * n_experts);
  grow(s.in, n * k * dim);
  grow(s.gate, n * k * ffn);
  grow(s.up, n * k * ffn);
  grow(s.out, n * k * dim);
  grow(s.chosen, n * k);
  grow(s.weight, n * k);
  grow(s.row, n * k);
  kernels::matmul(w.router, h, n, s.logits.data(), pool);
  add_bias(s.logits.data(), w.router_bias, n, n_experts);
  for (int64_t t = 0; t < n; ++t)
    route_token(s.logits.data() + t * n_experts, n_experts, k, s.chosen.data() + t * k, s.weight.data() + t * k);
  std::vector<int64_t> first_row;
  gather_rows(h, n, k, n_experts, dim, s, first_row);
  for (int e = 0; e < n_experts; ++e) {
    const int64_t r0 = first_row[static_cast<size_t>(e)], m = first_row[static_cast<size_t>(e) + 1] - r0;
    if (m == 0) continue;
    const ExpertWeights& x = w.experts[static_cast<size_t>(e)];
    float *gate = s.gate.data() + r0 * ffn, *up = s.up.data() + r0 * ffn, *y = s.out.data() + r0 * dim;
    kernels::matmul(x.gate, s.in.data() + r0 * dim, m, gate, pool);
    kernels::matmul(x.up, s.in.data() + r0 * dim, m, up, pool);
    add_bias(gate, x.gate_bias, m, ffn);
    add_bias(up, x.up_bias, m, ffn);
    gate_activation(c, gate, up, m * ffn, pool);
    kernels::matmul(x.down, gate, m, y, pool);
    add_bias(y, x.down_bias, m, dim);
  }
  for (int64_t t = 0; t < n; ++t) {
    float* o = out + t * dim;
    std::fill(o, o + dim, 0.f);
    for (int j = 0; j < k; ++j) {  // in increasing expert order
      const auto i = static_cast<size_t>(t * k + j);
      const float wt = s.weight[i];
      const float* y = s.out.data() + s.row[i] * dim;
      for (int64_t d = 0; d < dim; ++d) o[d] += wt * y[d];
    }
  }
}

}  // namespace exactly
