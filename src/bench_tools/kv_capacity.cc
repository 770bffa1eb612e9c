#include "bench_tools/kv_capacity.h"

#include <algorithm>
#include <fstream>

#include <nlohmann/json.hpp>

#include "core/error.h"
#include "core/format.h"
#include "kvcache/capacity.h"
#include "sched/scheduler.h"

namespace exactly::bench_tools {

std::vector<KVWorkItem> read_kv_workload(const std::string& path) {
  std::ifstream in(path);
  if (!in) throw Error(strformat("cannot open %s", path.c_str()), ExitCode::kBadInput);
  std::vector<KVWorkItem> work;
  std::string line;
  for (size_t n = 1; std::getline(in, line); ++n) {
    if (line.empty()) continue;
    nlohmann::json j = nlohmann::json::parse(line, nullptr, false);
    if (j.is_discarded() || !j.contains("prompt") || !j["prompt"].is_array() || !j.contains("max_tokens"))
      throw Error(strformat("%s:%zu: expected {\"prompt\": [ids], \"max_tokens\": n}", path.c_str(), n),
                  ExitCode::kBadInput);
    work.push_back({j["prompt"].get<std::vector<int32_t>>(), j["max_tokens"].get<int64_t>()});
  }
  return work;
}

namespace {

SchedulerConfig capacity_scheduler_config(int64_t max_len) {
  SchedulerConfig sc;
  sc.max_num_batched_tokens = 2048;
  sc.max_num_seqs = 1 << 20;  // memory, not a sequence cap, limits concurrency here
  sc.enable_prefix_caching = false;
  sc.max_model_len = max_len;
  return sc;
}

}  // namespace

KVPolicyResult simulate_kv_policy(const std::string& policy, const std::vector<KVWorkItem>& work, int64_t memory,
                                  int64_t bytes_per_slot, int32_t block_size, int64_t max_len) {
  const int32_t blocks = num_blocks_for_memory(memory, bytes_per_slot, block_size);
  if (blocks < 1) throw Error(strformat("%s: the memory holds no block of %d tokens", policy.c_str(), block_size));
  KVCacheManager kv(blocks, block_size, false);
  Scheduler sched(kv, capacity_scheduler_config(max_len));
  for (size_t i = 0; i < work.size(); ++i) {
    if (!sched.fits_alone(static_cast<int64_t>(work[i].prompt.size()) + work[i].max_tokens))
      throw Error(strformat("%s: request %zu does not fit the memory alone", policy.c_str(), i));
    sched.add_request(make_request(static_cast<RequestId>(i + 1), work[i].prompt, work[i].max_tokens));
  }
  KVPolicyResult r{policy, blocks, block_size, 0, 0, 0, 0, 0};
  double running_sum = 0, live = 0, slots = 0;
  while (sched.has_unfinished()) {
    SchedulerOutput out = sched.schedule();
    r.preemptions += static_cast<int64_t>(out.preempted.size());
    std::vector<StepTokens> tokens;
    for (const ScheduledChunk& c : out.scheduled)
      if (c.samples) tokens.push_back({c.id, {5}, false});
    sched.update_after_step(out, tokens);
    // Live tokens: those whose KV is in the cache, over the slots allocated.
    int64_t live_now = 0;
    for (const ScheduledChunk& c : out.scheduled) live_now += c.first_new_token + c.num_new_tokens;
    const KVCacheStats st = kv.stats();
    ++r.steps;
    running_sum += static_cast<double>(out.scheduled.size());
    r.peak_running = std::max<int64_t>(r.peak_running, static_cast<int64_t>(out.scheduled.size()));
    live += static_cast<double>(live_now);
    slots += static_cast<double>(st.used_slots);
  }
  r.mean_running = running_sum / static_cast<double>(std::max<int64_t>(1, r.steps));
  r.live_fraction = slots > 0 ? live / slots : 0;
  return r;
}

}  // namespace exactly::bench_tools
