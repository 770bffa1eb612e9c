#include "model/model.h"

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"

namespace exactly {

int check_forward_batch(const ForwardBatch& b, const ModelConfig& c, int num_layers, bool can_sample) {
  if (num_layers < 0) num_layers = c.n_layers;
  EXACTLY_CHECK(num_layers >= 1 && num_layers <= c.n_layers, "%d layers of %d", num_layers, c.n_layers);
  const int64_t n = b.num_tokens();
  EXACTLY_CHECK(n > 0 && static_cast<int64_t>(b.positions.size()) == n &&
                static_cast<int64_t>(b.slot_mapping.size()) == n);
  EXACTLY_CHECK(static_cast<int32_t>(b.query_start.size()) == b.num_seqs() + 1 && b.query_start.back() == n);
  for (int32_t t : b.tokens)
    if (t < 0 || t >= c.vocab_size) throw Error(strformat("token id %d is outside the vocabulary (%d)", t, c.vocab_size));
  for (int32_t r : b.logits_rows) EXACTLY_CHECK(r >= 0 && r < n, "logits row %d out of range", r);
  EXACTLY_CHECK(b.row_use.empty() || b.row_use.size() == b.logits_rows.size(), "row_use has %zu of %zu rows",
                b.row_use.size(), b.logits_rows.size());
  for (size_t i = 0; i < b.row_use.size(); ++i) {
    if (b.row_use[i] != RowUse::kSample) continue;
    EXACTLY_CHECK(can_sample, "logits row %zu is to be sampled by a model that does not sample", i);
    EXACTLY_CHECK(b.row_sampling.size() == b.logits_rows.size(), "row_sampling has %zu of %zu rows",
                  b.row_sampling.size(), b.logits_rows.size());
    const RowSampling& r = b.row_sampling[i];
    EXACTLY_CHECK(0 <= r.penalty_begin && r.penalty_begin <= r.penalty_end &&
                      static_cast<size_t>(r.penalty_end) <= b.penalty_tokens.size(),
                  "row %zu: penalty tokens [%d, %d) of %zu", i, r.penalty_begin, r.penalty_end, b.penalty_tokens.size());
    EXACTLY_CHECK(r.uniform >= 0.0 && r.uniform < 1.0, "row %zu: uniform %g outside [0, 1)", i, r.uniform);
  }
  return num_layers;
}

}  // namespace exactly
