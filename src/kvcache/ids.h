// Identifiers shared by the KV cache bookkeeping and the scheduler.
#pragma once

#include <cstdint>

namespace exactly {

using BlockId = int32_t;  // index of a physical KV block, 0..num_blocks-1
using SeqId = int64_t;    // a sequence owning a block table (one per request)

inline constexpr BlockId kNoBlock = -1;

}  // namespace exactly
