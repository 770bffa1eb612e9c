#include "kvcache/kv_cache_manager.h"

#include <algorithm>

#include "core/check.h"

namespace exactly {

KVCacheManager::KVCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching, int32_t window)
    : pool_(num_blocks, block_size), enable_prefix_caching_(enable_prefix_caching), window_(window) {
  EXACTLY_CHECK(window >= 0, "a KV window of %d positions", window);
}

int64_t KVCacheManager::blocks_for_tokens(int64_t num_tokens) const {
  return (num_tokens + block_size() - 1) / block_size();
}

int64_t KVCacheManager::max_blocks_held(int64_t num_tokens, int64_t max_step_tokens) const {
  const int64_t all = blocks_for_tokens(num_tokens);
  if (window_ == 0) return all;
  // A step's first query reads from W - 1 positions before it; its tokens
  // reach max_step_tokens - 1 after it. A run of n positions touches at most
  // (n + block_size - 2) / block_size + 1 blocks, however it is aligned.
  const int64_t span = window_ - 1 + max_step_tokens;
  return std::min(all, (span + block_size() - 2) / block_size() + 1);
}

size_t KVCacheManager::first_needed_block(int64_t position) const {
  if (window_ == 0) return 0;
  return static_cast<size_t>(std::max<int64_t>(0, position - window_ + 1) / block_size());
}

void KVCacheManager::release_before_window(Sequence& s, int64_t position) {
  const size_t end = std::min(first_needed_block(position), s.table.size());
  // Oldest first: the free list then evicts a sequence's head before the
  // blocks still near its window.
  for (; s.first_held < end; ++s.first_held) {
    pool_.release(s.table[s.first_held]);
    s.table[s.first_held] = kNoBlock;
  }
}

KVCacheManager::Sequence& KVCacheManager::sequence(SeqId seq) {
  auto it = seqs_.find(seq);
  EXACTLY_CHECK(it != seqs_.end(), "unknown sequence %lld", static_cast<long long>(seq));
  return it->second;
}

const KVCacheManager::Sequence& KVCacheManager::sequence(SeqId seq) const {
  auto it = seqs_.find(seq);
  EXACTLY_CHECK(it != seqs_.end(), "unknown sequence %lld", static_cast<long long>(seq));
  return it->second;
}

std::span<const BlockId> KVCacheManager::block_table(SeqId seq) const { return sequence(seq).table; }

int64_t KVCacheManager::num_reserved_tokens(SeqId seq) const { return sequence(seq).num_tokens; }

PrefixHit KVCacheManager::find_cached_prefix(std::span<const int32_t> tokens) const {
  PrefixHit hit;
  if (!enable_prefix_caching_ || tokens.empty()) return hit;
  const int64_t bs = block_size();
  const int64_t max_blocks = (static_cast<int64_t>(tokens.size()) - 1) / bs;
  std::vector<BlockId> found;  // [<= max_blocks] the cached block of each block of tokens, or kNoBlock
  BlockHash parent = kRootBlockHash;
  for (int64_t i = 0; i < max_blocks; ++i) {
    std::span<const int32_t> block_tokens = tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    const std::optional<BlockId> block = pool_.find(parent, block_tokens);
    if (!block && window_ == 0) break;  // without a window every block is read
    found.push_back(block.value_or(kNoBlock));
    parent = hash_block(parent, block_tokens);
  }
  // The most blocks k whose last (k - first_needed_block(k * bs)) are found.
  size_t best = 0;
  for (size_t k = 1, run = 0; k <= found.size(); ++k) {
    run = found[k - 1] != kNoBlock ? run + 1 : 0;
    if (run >= k - first_needed_block(static_cast<int64_t>(k) * bs)) best = k;
  }
  const size_t first = first_needed_block(static_cast<int64_t>(best) * bs);
  for (size_t i = 0; i < best; ++i) hit.blocks.push_back(i < first ? kNoBlock : found[i]);
  hit.num_tokens = static_cast<int64_t>(best) * bs;
  return hit;
}

bool KVCacheManager::allocate_new(SeqId seq, std::span<const int32_t> tokens, const PrefixHit& hit,
                                  int64_t num_new_tokens) {
  EXACTLY_CHECK(!contains(seq), "sequence %lld already has blocks", static_cast<long long>(seq));
  EXACTLY_CHECK(enable_prefix_caching_ || hit.blocks.empty(), "a prefix hit with prefix caching disabled");
  EXACTLY_CHECK(hit.num_tokens == static_cast<int64_t>(hit.blocks.size()) * block_size(),
                "a prefix hit of %lld tokens in %zu blocks", static_cast<long long>(hit.num_tokens),
                hit.blocks.size());
  EXACTLY_CHECK(num_new_tokens >= 0 && hit.num_tokens + num_new_tokens <= static_cast<int64_t>(tokens.size()),
                "%lld hit + %lld new tokens of a %zu-token sequence", static_cast<long long>(hit.num_tokens),
                static_cast<long long>(num_new_tokens), tokens.size());
  const int64_t num_tokens = hit.num_tokens + num_new_tokens;
  const int64_t num_fresh = blocks_for_tokens(num_tokens) - static_cast<int64_t>(hit.blocks.size());
  // Hit blocks before the first new token's window are never read: not taken.
  const size_t first_taken = first_needed_block(hit.num_tokens);
  // Hit blocks that sit in the free list stop being free once taken.
  int64_t hits_now_free = 0;
  for (size_t i = first_taken; i < hit.blocks.size(); ++i) {
    EXACTLY_CHECK(hit.blocks[i] != kNoBlock, "a prefix hit without its block %zu, which its window reads", i);
    hits_now_free += pool_.ref_count(hit.blocks[i]) == 0 ? 1 : 0;
  }
  if (num_fresh + hits_now_free > num_free_blocks()) return false;

  Sequence s;
  s.first_held = first_taken;
  // Take the hits before popping fresh blocks, or eviction could pick them.
  const auto bs = static_cast<size_t>(block_size());
  BlockHash parent = kRootBlockHash;
  for (size_t i = 0; i < hit.blocks.size(); ++i) {
    parent = hash_block(parent, tokens.subspan(i * bs, bs));
    s.hashes.push_back(parent);
    const BlockId b = i < first_taken ? kNoBlock : hit.blocks[i];
    if (b != kNoBlock) pool_.acquire(b);
    s.table.push_back(b);
  }
  for (int64_t i = 0; i < num_fresh; ++i) s.table.push_back(pool_.take_free());
  s.num_tokens = num_tokens;
  seqs_.emplace(seq, std::move(s));
  if (enable_prefix_caching_) {
    prefix_query_tokens_ += static_cast<int64_t>(tokens.size());
    prefix_hit_tokens_ += hit.num_tokens;
  }
  return true;
}

bool KVCacheManager::allocate(SeqId seq, int64_t num_computed_tokens, int64_t num_new_tokens,
                              std::vector<BlockCopy>& copies) {
  Sequence& s = sequence(seq);
  const int64_t bs = block_size();
  EXACTLY_CHECK(num_new_tokens >= 0 && num_computed_tokens >= 0 && num_computed_tokens <= s.num_tokens,
                "sequence %lld: writing %lld tokens at %lld of %lld reserved", static_cast<long long>(seq),
                static_cast<long long>(num_new_tokens), static_cast<long long>(num_computed_tokens),
                static_cast<long long>(s.num_tokens));
  EXACTLY_CHECK(num_computed_tokens >= static_cast<int64_t>(s.hashes.size()) * bs,
                "sequence %lld: writing at %lld into committed blocks (truncate first)", static_cast<long long>(seq),
                static_cast<long long>(num_computed_tokens));
  EXACTLY_CHECK(first_needed_block(num_computed_tokens) >= s.first_held,
                "sequence %lld: position %lld reads blocks released out of the window", static_cast<long long>(seq),
                static_cast<long long>(num_computed_tokens));
  release_before_window(s, num_computed_tokens);
  if (num_new_tokens == 0) return true;
  const int64_t end = num_computed_tokens + num_new_tokens;
  const int64_t held = static_cast<int64_t>(s.table.size());
  const int64_t first_written = num_computed_tokens / bs;
  const int64_t last_held_written = std::min((end - 1) / bs, held - 1);
  int64_t num_copies = 0;
  for (int64_t i = first_written; i <= last_held_written; ++i) num_copies += pool_.ref_count(s.table[i]) > 1 ? 1 : 0;
  const int64_t num_fresh = std::max<int64_t>(0, blocks_for_tokens(end) - held);
  if (num_copies + num_fresh > num_free_blocks()) return false;

  for (int64_t i = first_written; i <= last_held_written; ++i) {
    const BlockId old = s.table[i];
    if (pool_.ref_count(old) > 1) {
      const BlockId copy = pool_.take_free();
      copies.push_back({old, copy});
      pool_.release(old);
      s.table[i] = copy;
    } else {
      // Ours alone, but it may still be cached from before a rollback: its
      // contents are about to change, so the cache must stop offering it.
      pool_.forget_hash(old);
    }
  }
  for (int64_t i = 0; i < num_fresh; ++i) s.table.push_back(pool_.take_free());
  s.num_tokens = std::max(s.num_tokens, end);
  return true;
}

void KVCacheManager::commit_computed(SeqId seq, std::span<const int32_t> tokens, int64_t num_computed_tokens) {
  Sequence& s = sequence(seq);
  EXACTLY_CHECK(num_computed_tokens <= static_cast<int64_t>(tokens.size()) && num_computed_tokens <= s.num_tokens,
                "sequence %lld: committing %lld tokens of %zu known, %lld reserved", static_cast<long long>(seq),
                static_cast<long long>(num_computed_tokens), tokens.size(), static_cast<long long>(s.num_tokens));
  if (!enable_prefix_caching_) return;
  const int64_t bs = block_size();
  const int64_t num_full = num_computed_tokens / bs;
  for (int64_t i = static_cast<int64_t>(s.hashes.size()); i < num_full; ++i) {
    const BlockHash parent = i == 0 ? kRootBlockHash : s.hashes[i - 1];
    std::span<const int32_t> block_tokens = tokens.subspan(static_cast<size_t>(i * bs), static_cast<size_t>(bs));
    // A duplicate (another block already caches this prefix) stays uncached,
    // and so does a block released out of the window before its commit; the
    // chain continues either way since it depends on tokens only.
    if (static_cast<size_t>(i) >= s.first_held) pool_.register_hash(s.table[i], parent, block_tokens);
    s.hashes.push_back(hash_block(parent, block_tokens));
  }
}

void KVCacheManager::fork(SeqId parent, SeqId child) {
  EXACTLY_CHECK(!contains(child), "fork into existing sequence %lld", static_cast<long long>(child));
  Sequence copy = sequence(parent);
  for (size_t i = copy.first_held; i < copy.table.size(); ++i) pool_.acquire(copy.table[i]);
  seqs_.emplace(child, std::move(copy));
}

void KVCacheManager::release_from(Sequence& s, size_t first_block) {
  // Tail first: the end of a sequence is the part least likely to be shared
  // by a later prompt, so it should be evicted before the head.
  while (s.table.size() > first_block) {
    if (s.table.back() != kNoBlock) pool_.release(s.table.back());
    s.table.pop_back();
  }
  s.first_held = std::min(s.first_held, s.table.size());
}

void KVCacheManager::truncate(SeqId seq, int64_t num_tokens) {
  Sequence& s = sequence(seq);
  EXACTLY_CHECK(num_tokens >= 0 && num_tokens <= s.num_tokens, "sequence %lld: truncating %lld tokens to %lld",
                static_cast<long long>(seq), static_cast<long long>(s.num_tokens), static_cast<long long>(num_tokens));
  EXACTLY_CHECK(first_needed_block(num_tokens) >= s.first_held,
                "sequence %lld: truncating to %lld tokens, whose window was released", static_cast<long long>(seq),
                static_cast<long long>(num_tokens));
  const int64_t bs = block_size();
  release_from(s, static_cast<size_t>(blocks_for_tokens(num_tokens)));
  s.hashes.resize(std::min(s.hashes.size(), static_cast<size_t>(num_tokens / bs)));
  s.num_tokens = num_tokens;
  if (num_tokens % bs != 0 && pool_.ref_count(s.table.back()) == 1) pool_.forget_hash(s.table.back());
}

void KVCacheManager::free(SeqId seq) {
  Sequence& s = sequence(seq);
  release_from(s, 0);
  seqs_.erase(seq);
}

KVCacheStats KVCacheManager::stats() const {
  KVCacheStats st;
  st.total_blocks = num_blocks();
  st.free_blocks = num_free_blocks();
  st.used_blocks = st.total_blocks - st.free_blocks;
  st.cached_blocks = pool_.num_cached_blocks();
  st.prefix_query_tokens = prefix_query_tokens_;
  st.prefix_hit_tokens = prefix_hit_tokens_;
  for (const auto& [id, s] : seqs_)
    st.reserved_tokens += s.num_tokens - static_cast<int64_t>(s.first_held) * block_size();
  st.used_slots = static_cast<int64_t>(st.used_blocks) * block_size();
  return st;
}

void KVCacheManager::check_integrity() const {
  pool_.check_integrity();
  std::vector<int32_t> references(static_cast<size_t>(num_blocks()), 0);  // [num_blocks]
  for (const auto& [id, s] : seqs_) {
    const long long seq = static_cast<long long>(id);
    EXACTLY_CHECK(static_cast<int64_t>(s.table.size()) == blocks_for_tokens(s.num_tokens),
                  "sequence %lld holds %zu blocks for %lld tokens", seq, s.table.size(),
                  static_cast<long long>(s.num_tokens));
    EXACTLY_CHECK(s.hashes.size() <= static_cast<size_t>(s.num_tokens / block_size()),
                  "sequence %lld commits %zu blocks of %lld tokens", seq, s.hashes.size(),
                  static_cast<long long>(s.num_tokens));
    EXACTLY_CHECK(enable_prefix_caching_ || s.hashes.empty(), "sequence %lld has hashes without prefix caching", seq);
    EXACTLY_CHECK(s.first_held <= std::min(s.table.size(), first_needed_block(s.num_tokens)),
                  "sequence %lld released %zu blocks of %zu, beyond its window", seq, s.first_held, s.table.size());
    for (size_t i = 0; i < s.table.size(); ++i) {
      const BlockId b = s.table[i];
      EXACTLY_CHECK((b == kNoBlock) == (i < s.first_held), "sequence %lld block %zu is %d with %zu released", seq, i,
                    b, s.first_held);
      if (b == kNoBlock) continue;
      EXACTLY_CHECK(b >= 0 && b < num_blocks(), "sequence %lld refers to block %d", seq, b);
      ++references[b];
      std::optional<BlockHash> cached = pool_.hash_of(b);
      if (i < s.hashes.size()) {
        // A committed block is either cached under the sequence's own chain
        // hash or uncached (a duplicate of a block cached elsewhere).
        EXACTLY_CHECK(!cached || *cached == s.hashes[i], "sequence %lld block %zu is cached under another prefix",
                      seq, i);
      }
    }
  }
  for (BlockId b = 0; b < num_blocks(); ++b) {
    EXACTLY_CHECK(pool_.ref_count(b) == references[b], "block %d counts %d references but %d tables hold it", b,
                  pool_.ref_count(b), references[b]);
  }
}

}  // namespace exactly
