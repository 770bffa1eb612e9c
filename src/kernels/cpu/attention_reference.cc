// Naive fp32 attention: all scores of a query, then max, exponentials, sum and
// the weighted sum of values, each accumulated left to right. It is the
// yardstick of a plain same-precision implementation that the tests hold the
// kernel to.
#include <algorithm>
#include <cmath>
#include <vector>

#include "kernels/cpu/attention_layout.h"
#include "kernels/ops.h"

namespace exactly::kernels::reference {

void attention(const PagedKV& c, const AttentionBatch& b, const float* q, int n_heads, float scale, float* out,
               AttentionMask mask, int32_t window, const float* sinks) {
  cpu::check_attention(c, b, n_heads);
  EXACTLY_CHECK(window >= 0 && (window == 0 || mask == AttentionMask::causal),
                "attention: a sliding window (%d) needs the causal mask", window);
  const int64_t n_tokens = b.query_start[b.n_seqs];
  const int group = n_heads / c.n_kv_heads;
  const int hd = c.head_dim;
  std::vector<float> p;  // [n_keys] scores, then probabilities
  for (int64_t t = 0; t < n_tokens; ++t) {
    cpu::QueryPlace place = cpu::place_query(b, t);
    if (mask == AttentionMask::none) place.pos = b.seq_lens[place.seq] - 1;  // every key of the sequence
    const int32_t first = window > 0 ? std::max(0, place.pos - window + 1) : 0;
    for (int h = 0; h < n_heads; ++h) {
      const float* qh = q + (t * n_heads + h) * hd;
      float* oh = out + (t * n_heads + h) * hd;
      p.assign(static_cast<size_t>(place.pos) + 1, 0.0f);
      float max_score = -INFINITY;
      for (int32_t j = first; j <= place.pos; ++j) {
        const float* k = c.k + cpu::kv_offset(c, b, place.seq, j, h / group);
        float s = 0.0f;
        for (int d = 0; d < hd; ++d) s += qh[d] * k[d];
        p[static_cast<size_t>(j)] = s * scale;
        max_score = std::max(max_score, s * scale);
      }
      if (sinks != nullptr) max_score = std::max(max_score, sinks[h]);
      float sum = sinks != nullptr ? std::exp(sinks[h] - max_score) : 0.0f;
      for (int32_t j = first; j <= place.pos; ++j) {
        float& pj = p[static_cast<size_t>(j)];
        pj = std::exp(pj - max_score);
        sum += pj;
      }
      for (int d = 0; d < hd; ++d) oh[d] = 0.0f;
      for (int32_t j = first; j <= place.pos; ++j) {
        const float* v = c.v + cpu::kv_offset(c, b, place.seq, j, h / group);
        for (int d = 0; d < hd; ++d) oh[d] += p[static_cast<size_t>(j)] * v[d];
      }
      for (int d = 0; d < hd; ++d) oh[d] /= sum;
    }
  }
}

}  // namespace exactly::kernels::reference
