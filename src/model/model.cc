#include "model/model.h"

#include <algorithm>

#include "core/check.h"
#include "core/error.h"
#include "core/format.h"

namespace exactly {

int check_forward_batch(const ForwardBatch& b, const Model& model, int num_layers) {
  const ModelConfig& c = model.config();
  const bool can_sample = model.samples_rows();
  const int64_t max_entries = model.verified_draft_entries();
  if (num_layers < 0) num_layers = c.n_layers;
  EXACTLY_CHECK(num_layers >= 1 && num_layers <= c.n_layers, "%d layers of %d", num_layers, c.n_layers);
  const int64_t n = b.input.num_tokens();
  EXACTLY_CHECK(n > 0 && static_cast<int64_t>(b.input.positions.size()) == n &&
                static_cast<int64_t>(b.input.slot_mapping.size()) == n);
  EXACTLY_CHECK(static_cast<int32_t>(b.input.query_start.size()) == b.input.num_seqs() + 1 && b.input.query_start.back() == n);
  for (int32_t t : b.input.tokens)
    if (t < 0 || t >= c.vocab_size) throw Error(strformat("token id %d is outside the vocabulary (%d)", t, c.vocab_size));
  for (int32_t r : b.input.logits_rows) EXACTLY_CHECK(r >= 0 && r < n, "logits row %d out of range", r);
  EXACTLY_CHECK(b.input.hidden_rows.empty() || model.returns_hidden(), "hidden states asked of a model that returns none");
  for (int32_t r : b.input.hidden_rows) EXACTLY_CHECK(r >= 0 && r < n, "hidden row %d out of range", r);
  EXACTLY_CHECK(b.jobs.row_use.empty() || b.jobs.row_use.size() == b.input.logits_rows.size(), "row_use has %zu of %zu rows",
                b.jobs.row_use.size(), b.input.logits_rows.size());
  size_t verify_rows = 0;
  for (const RowVerify& v : b.jobs.verifies) {
    EXACTLY_CHECK(max_entries > 0, "a verify is to be run by a model that does not verify");
    const auto k = static_cast<size_t>(v.num_drafts);
    EXACTLY_CHECK(v.num_drafts >= 1 && v.first_row >= 0 && static_cast<size_t>(v.first_row) + k < b.jobs.row_use.size() &&
                      v.draft_begin >= 0 && static_cast<size_t>(v.draft_begin) + k <= b.jobs.verify_drafts.size() &&
                      v.q_begin >= 0 && static_cast<size_t>(v.q_begin) + k < b.jobs.q_offsets.size() &&
                      v.uniform_begin >= 0 && static_cast<size_t>(v.uniform_begin) + k < b.jobs.verify_uniforms.size(),
                  "verify of %d drafts from row %d does not fit the batch's arrays", v.num_drafts, v.first_row);
    for (size_t j = 0; j <= k; ++j)
      EXACTLY_CHECK(b.jobs.row_use[static_cast<size_t>(v.first_row) + j] == RowUse::kVerify, "verify row %zu not marked",
                    static_cast<size_t>(v.first_row) + j);
    for (size_t j = 0; j < k; ++j) {
      const int32_t begin = b.jobs.q_offsets[static_cast<size_t>(v.q_begin) + j];
      const int32_t end = b.jobs.q_offsets[static_cast<size_t>(v.q_begin) + j + 1];
      EXACTLY_CHECK(0 <= begin && begin <= end && static_cast<size_t>(end) <= b.jobs.q_entries.size(),
                    "draft distribution [%d, %d) of %zu entries", begin, end, b.jobs.q_entries.size());
    }
    verify_rows += k + 1;
  }
  EXACTLY_CHECK(b.jobs.verifies.empty() || static_cast<int64_t>(b.jobs.q_entries.size()) <= max_entries,
                "%zu draft-distribution entries for a model that takes %lld", b.jobs.q_entries.size(),
                static_cast<long long>(max_entries));
  EXACTLY_CHECK(verify_rows == static_cast<size_t>(std::count(b.jobs.row_use.begin(), b.jobs.row_use.end(), RowUse::kVerify)),
                "rows marked kVerify outside any verify");
  for (size_t i = 0; i < b.jobs.row_use.size(); ++i) {
    if (b.jobs.row_use[i] != RowUse::kSample && b.jobs.row_use[i] != RowUse::kVerify) continue;
    EXACTLY_CHECK(can_sample, "logits row %zu is to be sampled by a model that does not sample", i);
    EXACTLY_CHECK(b.jobs.row_sampling.size() == b.input.logits_rows.size(), "row_sampling has %zu of %zu rows",
                  b.jobs.row_sampling.size(), b.input.logits_rows.size());
    const RowSampling& r = b.jobs.row_sampling[i];
    EXACTLY_CHECK(0 <= r.penalty_begin && r.penalty_begin <= r.penalty_end &&
                      static_cast<size_t>(r.penalty_end) <= b.jobs.penalty_tokens.size(),
                  "row %zu: penalty tokens [%d, %d) of %zu", i, r.penalty_begin, r.penalty_end, b.jobs.penalty_tokens.size());
    EXACTLY_CHECK(r.uniform >= 0.0 && r.uniform < 1.0, "row %zu: uniform %g outside [0, 1)", i, r.uniform);
  }
  EXACTLY_CHECK(b.jobs.row_processing.empty() || model.processes_rows(), "rows to process for a model that does not");
  for (size_t j = 0; j < b.jobs.row_processing.size(); ++j) {
    const RowProcessing& p = b.jobs.row_processing[j];
    EXACTLY_CHECK(p.row >= 0 && static_cast<size_t>(p.row) < b.jobs.row_use.size() &&
                      b.jobs.row_use[static_cast<size_t>(p.row)] == RowUse::kSample &&
                      (j == 0 || b.jobs.row_processing[j - 1].row < p.row),
                  "processed row %d: not a sampled row in order", p.row);
    EXACTLY_CHECK(0 <= p.bias_begin && p.bias_begin <= p.bias_end &&
                      static_cast<size_t>(p.bias_end) <= b.jobs.logit_biases.size(),
                  "processed row %d: biases [%d, %d) of %zu", p.row, p.bias_begin, p.bias_end, b.jobs.logit_biases.size());
    for (int32_t e = p.bias_begin; e < p.bias_end; ++e) {
      const int32_t id = b.jobs.logit_biases[static_cast<size_t>(e)].id;
      EXACTLY_CHECK(id >= 0 && id < model.config().vocab_size, "processed row %d: bias for token %d", p.row, id);
    }
    EXACTLY_CHECK(p.mask == nullptr || b.jobs.await_masks, "processed row %d: a mask with nothing to await it", p.row);
  }
  return num_layers;
}

}  // namespace exactly
