// How many requests fit in a KV memory budget, and how much of the allocated
// KV holds live tokens, for a workload (`exactly bench kv`). The real
// scheduler and block manager run; the model is replaced by a stand-in that
// samples a fixed token, since only the block bookkeeping matters here.
//
// Two policies over the same memory:
//   paged    blocks of a few tokens allocated as sequences grow;
//   reserve  each request reserves its maximum length in contiguous slots up
//            front, as systems without paging must (one block of that size
//            per request).
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace exactly::bench_tools {

struct KVWorkItem {
  std::vector<int32_t> prompt;  // [prompt tokens]
  int64_t max_tokens = 0;
};

// Every non-empty line of a JSONL file of {"prompt": [ids], "max_tokens": n}
// (bench/make_workload.py). Throws Error(kBadInput) naming the file and line.
std::vector<KVWorkItem> read_kv_workload(const std::string& path);

struct KVPolicyResult {
  std::string policy;
  int32_t blocks = 0;
  int32_t block_size = 0;
  int64_t steps = 0;
  double mean_running = 0;
  int64_t peak_running = 0;
  double live_fraction = 0;  // live tokens / allocated slots, averaged over steps weighted by slots
  int64_t preemptions = 0;
};

// Runs the workload to completion with blocks of `block_size` tokens in
// `memory` bytes; `max_len` caps each sequence. Throws Error naming the policy
// when the memory holds no block or a request does not fit it alone.
KVPolicyResult simulate_kv_policy(const std::string& policy, const std::vector<KVWorkItem>& work, int64_t memory,
                                  int64_t bytes_per_slot, int32_t block_size, int64_t max_len);

}  // namespace exactly::bench_tools
