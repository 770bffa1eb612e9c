#include "model/attention_runs.h"

#include <algorithm>

#include "core/check.h"

namespace exactly {

void split_attention_runs(std::span<const int32_t> query_start, std::span<const int32_t> seq_lens, int max_runs,
                          std::vector<AttentionRun>& runs) {
  EXACTLY_CHECK(!query_start.empty() && seq_lens.size() + 1 == query_start.size(),
                "split_attention_runs: %zu query starts for %zu sequences", query_start.size(), seq_lens.size());
  EXACTLY_CHECK(max_runs >= 1, "split_attention_runs: at most %d runs", max_runs);
  runs.clear();
  const auto n = static_cast<int32_t>(seq_lens.size());
  auto q_len = [&](int32_t s) { return query_start[static_cast<size_t>(s) + 1] - query_start[static_cast<size_t>(s)]; };
  auto add = [&](AttentionRun& run, int32_t s) {
    ++run.num_seqs;
    run.max_query_len = std::max(run.max_query_len, q_len(s));
    run.max_seq_len = std::max(run.max_seq_len, seq_lens[static_cast<size_t>(s)]);
  };
  for (int32_t s = 0; s < n; ++s) {
    const bool single = q_len(s) == 1;
    if (runs.empty() || runs.back().single_token != single) runs.push_back(AttentionRun{s, 0, single, 0, 0});
    add(runs.back(), s);
  }
  if (static_cast<int>(runs.size()) <= max_runs) return;
  AttentionRun all{0, 0, true, 0, 0};
  for (const AttentionRun& r : runs) all.single_token = all.single_token && r.single_token;
  for (int32_t s = 0; s < n; ++s) add(all, s);
  runs.assign(1, all);
}

}  // namespace exactly
