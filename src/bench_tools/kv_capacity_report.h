// `exactly bench kv`'s report: the two policies side by side as a Markdown
// table with their ratio of concurrent requests, and as JSON.
#pragma once

#include <cstdint>
#include <string>

#include "bench_tools/kv_capacity.h"

namespace exactly::bench_tools {

// `memory_text` is the budget as the user wrote it.
void print_kv_capacity(const std::string& memory_text, int64_t bytes_per_slot, size_t num_requests,
                       const KVPolicyResult& paged, const KVPolicyResult& reserve);

void write_kv_capacity_json(const std::string& path, const KVPolicyResult& paged, const KVPolicyResult& reserve);

}  // namespace exactly::bench_tools
