// A KVCacheManager driven together with a simulated KV memory (which token
// each slot holds) and the test's own record of every sequence. Expectations
// (reference counts, feasibility, copy-on-write, blocks released out of a
// window) are derived from that record and from scanning the block tables,
// not from the manager's internals, and the memory shows whether every
// sequence still reads back its own tokens (with a window, those its next
// query reads).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "kvcache/kv_cache_manager.h"

namespace exactly::testing {

class KvHarness {
 public:
  struct SimSeq {
    std::vector<int32_t> tokens;  // [len] logical tokens; [0, written) have KV in memory
    int64_t written = 0;
  };

  KvHarness(int32_t num_blocks, int32_t block_size, bool prefix_caching = true, int32_t window = 0)
      : kv(num_blocks, block_size, prefix_caching, window),
        bs_(block_size),
        window_(window),
        memory_(static_cast<size_t>(num_blocks) * block_size, kGarbage) {}

  static constexpr int32_t kGarbage = -1;

  KVCacheManager kv;
  std::map<SeqId, SimSeq> seqs;
  int64_t num_copies = 0;
  int64_t num_hits_past_the_window = 0;  // prefix hits with blocks before their window

  int64_t blocks_for(int64_t tokens) const { return (tokens + bs_ - 1) / bs_; }
  // The first position a query at `pos` reads, and the first block holding it.
  int64_t first_read(int64_t pos) const { return window_ > 0 ? std::max<int64_t>(0, pos - window_ + 1) : 0; }
  int64_t first_needed_block(int64_t pos) const { return first_read(pos) / bs_; }
  // Leading table entries of `id` released out of the window.
  int64_t released(SeqId id) const {
    std::span<const BlockId> t = kv.block_table(id);
    return std::find_if(t.begin(), t.end(), [](BlockId b) { return b != kNoBlock; }) - t.begin();
  }
  // The fewest tokens `id` may keep: its next query's window must be held.
  int64_t min_truncation(SeqId id) const {
    const int64_t r = released(id);
    return r == 0 ? 0 : r * bs_ + window_ - 1;
  }

  // Number of tables holding each block, from the tables themselves.
  std::vector<int32_t> table_refs() const {
    std::vector<int32_t> refs(static_cast<size_t>(kv.num_blocks()), 0);
    for (const auto& [id, s] : seqs) {
      for (BlockId b : kv.block_table(id))
        if (b != kNoBlock) ++refs[b];
    }
    return refs;
  }
  int64_t unreferenced(const std::vector<int32_t>& refs) const {
    return std::count(refs.begin(), refs.end(), 0);
  }

  std::vector<int32_t> block_contents(BlockId b) const {
    return {memory_.begin() + static_cast<ptrdiff_t>(b) * bs_, memory_.begin() + static_cast<ptrdiff_t>(b + 1) * bs_};
  }

  // Starts a sequence with `prompt`, computing `chunk` tokens past any prefix
  // hit (capped to what is left). Returns the new id, or -1 when it did not fit.
  SeqId start(const std::vector<int32_t>& prompt, int64_t chunk) {
    const PrefixHit hit = kv.find_cached_prefix(prompt);
    EXPECT_EQ(hit.num_tokens, static_cast<int64_t>(hit.blocks.size()) * bs_);
    EXPECT_LE(hit.num_tokens, static_cast<int64_t>(prompt.size()) - 1) << "a hit must leave a token to compute";
    // Every block the first new token's window reads holds the prompt's tokens.
    const auto first_taken = static_cast<size_t>(first_needed_block(hit.num_tokens));
    if (first_taken > 0) ++num_hits_past_the_window;
    for (size_t i = 0; i < hit.blocks.size(); ++i) {
      if (i < first_taken) {
        EXPECT_EQ(hit.blocks[i], kNoBlock) << "prefix hit block " << i << " lies before the window";
        continue;
      }
      if (hit.blocks[i] == kNoBlock) {
        ADD_FAILURE() << "prefix hit block " << i << " is missing from the window";
        return -1;
      }
      std::vector<int32_t> expected(prompt.begin() + static_cast<ptrdiff_t>(i) * bs_,
                                    prompt.begin() + static_cast<ptrdiff_t>(i + 1) * bs_);
      EXPECT_EQ(block_contents(hit.blocks[i]), expected) << "prefix hit block " << i << " holds other tokens";
    }
    chunk = std::min<int64_t>(chunk, static_cast<int64_t>(prompt.size()) - hit.num_tokens);
    const std::vector<int32_t> refs = table_refs();
    int64_t hits_free = 0;
    for (size_t i = first_taken; i < hit.blocks.size(); ++i) hits_free += refs[hit.blocks[i]] == 0 ? 1 : 0;
    const int64_t fresh = blocks_for(hit.num_tokens + chunk) - static_cast<int64_t>(hit.blocks.size());
    const bool should_fit = fresh + hits_free <= unreferenced(refs);

    const SeqId id = next_id_++;
    const bool ok = kv.allocate_new(id, prompt, hit, chunk);
    EXPECT_EQ(ok, should_fit);
    if (!ok) {
      EXPECT_FALSE(kv.contains(id));
      return -1;
    }
    std::span<const BlockId> table = kv.block_table(id);
    for (size_t i = 0; i < hit.blocks.size(); ++i)
      EXPECT_EQ(table[i], i < first_taken ? kNoBlock : hit.blocks[i]) << "the table starts with the hit's window";
    for (size_t i = hit.blocks.size(); i < table.size(); ++i) EXPECT_EQ(refs[table[i]], 0) << "fresh block was in use";
    seqs[id] = {prompt, hit.num_tokens};
    write(id, hit.num_tokens + chunk);
    return id;
  }

  // Computes `n` more tokens of `id`; new tokens come from `more` when the
  // sequence has no uncomputed ones. Returns whether the blocks were found.
  bool extend(SeqId id, int64_t n, const std::vector<int32_t>& more = {}) {
    SimSeq& s = seqs.at(id);
    s.tokens.insert(s.tokens.end(), more.begin(), more.end());
    n = std::min<int64_t>(n, static_cast<int64_t>(s.tokens.size()) - s.written);
    const int64_t end = s.written + n;
    std::vector<int32_t> refs = table_refs();
    std::vector<BlockId> before(kv.block_table(id).begin(), kv.block_table(id).end());
    const int64_t held = static_cast<int64_t>(before.size());
    // The blocks before the window of the first new token go first, fit or not.
    for (int64_t i = 0; i < std::min(first_needed_block(s.written), held); ++i) {
      if (before[i] != kNoBlock) --refs[before[i]];
      before[i] = kNoBlock;
    }
    std::vector<int64_t> shared_written;  // logical blocks written while shared
    for (int64_t i = s.written / bs_; n > 0 && i <= (end - 1) / bs_ && i < held; ++i) {
      EXPECT_NE(before[i], kNoBlock) << "a written block was released";
      if (refs[before[i]] > 1) shared_written.push_back(i);
    }
    const int64_t fresh = std::max<int64_t>(0, blocks_for(end) - held);
    const bool should_fit = static_cast<int64_t>(shared_written.size()) + fresh <= unreferenced(refs);

    std::vector<BlockCopy> copies;
    const bool ok = kv.allocate(id, s.written, n, copies);
    EXPECT_EQ(ok, should_fit);
    if (!ok) {
      EXPECT_TRUE(copies.empty());
      EXPECT_TRUE(std::equal(before.begin(), before.end(), kv.block_table(id).begin(), kv.block_table(id).end()));
      s.tokens.resize(s.tokens.size() - more.size());
      return false;
    }
    std::span<const BlockId> after = kv.block_table(id);
    EXPECT_EQ(copies.size(), shared_written.size()) << "copy exactly the shared blocks written";
    for (size_t k = 0; k < std::min(copies.size(), shared_written.size()); ++k) {
      const int64_t i = shared_written[k];
      EXPECT_EQ(copies[k].src, before[i]);
      EXPECT_EQ(copies[k].dst, after[i]);
      EXPECT_EQ(refs[copies[k].dst], 0) << "a copy must go to a free block";
    }
    for (int64_t i = 0; i < held; ++i) {
      const bool copied = std::find(shared_written.begin(), shared_written.end(), i) != shared_written.end();
      if (!copied) {
        EXPECT_EQ(after[i], before[i]) << "block " << i << " moved without a copy";
      }
    }
    for (const BlockCopy& c : copies) {
      std::copy_n(memory_.begin() + static_cast<ptrdiff_t>(c.src) * bs_, bs_,
                  memory_.begin() + static_cast<ptrdiff_t>(c.dst) * bs_);
    }
    num_copies += static_cast<int64_t>(copies.size());
    write(id, end);
    return true;
  }

  void commit(SeqId id) { kv.commit_computed(id, seqs.at(id).tokens, seqs.at(id).written); }

  SeqId fork(SeqId parent) {
    const SeqId child = next_id_++;
    kv.fork(parent, child);
    SimSeq s = seqs.at(parent);
    s.tokens.resize(static_cast<size_t>(s.written));
    seqs[child] = s;
    return child;
  }

  // Truncates to `num_tokens`, or to the fewest the window allows.
  void truncate(SeqId id, int64_t num_tokens) {
    SimSeq& s = seqs.at(id);
    num_tokens = std::max(num_tokens, min_truncation(id));
    kv.truncate(id, num_tokens);
    s.tokens.resize(static_cast<size_t>(num_tokens));
    s.written = num_tokens;
  }

  void free(SeqId id) {
    kv.free(id);
    seqs.erase(id);
  }

  // Every invariant, from the manager's own check and from the simulation.
  void verify() const {
    kv.check_integrity();
    ASSERT_EQ(kv.num_seqs(), seqs.size());
    const std::vector<int32_t> refs = table_refs();
    for (BlockId b = 0; b < kv.num_blocks(); ++b) {
      ASSERT_EQ(kv.pool().ref_count(b), refs[b]) << "block " << b;
      if (std::optional<BlockHash> h = kv.pool().hash_of(b)) {
        std::span<const int32_t> stored = kv.pool().tokens_of(b);
        ASSERT_EQ(std::vector<int32_t>(stored.begin(), stored.end()), block_contents(b))
            << "cached block " << b << " was overwritten";
      }
    }
    ASSERT_EQ(kv.num_free_blocks(), unreferenced(refs));
    for (const auto& [id, s] : seqs) {
      std::span<const BlockId> table = kv.block_table(id);
      ASSERT_EQ(static_cast<int64_t>(table.size()), blocks_for(s.written)) << "seq " << id;
      for (int64_t p = first_read(s.written); p < s.written; ++p) {
        ASSERT_NE(table[p / bs_], kNoBlock) << "seq " << id << " released position " << p << " of its window";
        ASSERT_EQ(memory_[static_cast<size_t>(table[p / bs_] * bs_ + p % bs_)], s.tokens[static_cast<size_t>(p)])
            << "seq " << id << " position " << p << " reads another sequence's KV";
      }
    }
  }

  void free_all_and_check_empty() {
    while (!seqs.empty()) free(seqs.begin()->first);
    verify();
    EXPECT_EQ(kv.num_free_blocks(), kv.num_blocks()) << "blocks leaked";
  }

 private:
  void write(SeqId id, int64_t end) {
    SimSeq& s = seqs.at(id);
    std::span<const BlockId> table = kv.block_table(id);
    for (int64_t p = s.written; p < end; ++p) {
      memory_[static_cast<size_t>(table[p / bs_] * bs_ + p % bs_)] = s.tokens[static_cast<size_t>(p)];
    }
    s.written = end;
  }

  int32_t bs_;
  int32_t window_;
  std::vector<int32_t> memory_;  // [num_blocks, block_size] token whose KV each slot holds
  SeqId next_id_ = 0;
};

}  // namespace exactly::testing
