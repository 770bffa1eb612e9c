// Runs requests through an Engine to completion for tests: the tokens each
// request generated, in request order, with the KV bookkeeping checked after
// every step and every block — the draft model's cache included — back in its
// pool at the end.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "engine/engine.h"

namespace exactly::testing {

inline std::vector<std::vector<int32_t>> run_engine(LoadedModel& model, const std::vector<RequestParams>& reqs,
                                                    EngineConfig config, EngineStats* stats = nullptr) {
  if (config.threads == 0) config.threads = 2;
  Engine engine(model, config);
  std::map<ClientRequestId, size_t> index;
  for (size_t i = 0; i < reqs.size(); ++i) index[engine.add_request(reqs[i])] = i;
  std::vector<std::vector<int32_t>> out(reqs.size());
  while (engine.has_unfinished()) {
    for (const RequestOutput& o : engine.step())
      for (const CompletionDelta& d : o.completions)
        out[index.at(o.id)].insert(out[index.at(o.id)].end(), d.token_ids.begin(), d.token_ids.end());
    engine.check_integrity();
  }
  EXPECT_EQ(engine.kv_stats().used_blocks, 0) << "target KV blocks leaked";
  EXPECT_EQ(engine.draft_kv_stats().used_blocks, 0) << "draft KV blocks leaked";
  if (stats) *stats = engine.stats();
  return out;
}

}  // namespace exactly::testing
