#include "model/model.h"

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"

namespace exactly {

int check_forward_batch(const ForwardBatch& b, const ModelConfig& c, int num_layers) {
  if (num_layers < 0) num_layers = c.n_layers;
  EXACTLY_CHECK(num_layers >= 1 && num_layers <= c.n_layers, "%d layers of %d", num_layers, c.n_layers);
  const int64_t n = b.num_tokens();
  EXACTLY_CHECK(n > 0 && static_cast<int64_t>(b.positions.size()) == n &&
                static_cast<int64_t>(b.slot_mapping.size()) == n);
  EXACTLY_CHECK(static_cast<int32_t>(b.query_start.size()) == b.num_seqs() + 1 && b.query_start.back() == n);
  for (int32_t t : b.tokens)
    if (t < 0 || t >= c.vocab_size) throw Error(strformat("token id %d is outside the vocabulary (%d)", t, c.vocab_size));
  for (int32_t r : b.logits_rows) EXACTLY_CHECK(r >= 0 && r < n, "logits row %d out of range", r);
  EXACTLY_CHECK(b.argmax_only.empty() || b.argmax_only.size() == b.logits_rows.size(), "argmax_only has %zu of %zu rows",
                b.argmax_only.size(), b.logits_rows.size());
  return num_layers;
}

}  // namespace exactly
