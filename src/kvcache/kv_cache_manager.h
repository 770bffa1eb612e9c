// Per-sequence block tables over one BlockPool: prefix-cache lookup, slot
// allocation, hashing of computed blocks, fork with copy-on-write, rollback
// and release. One manager per KV pool; the scheduler calls it, the engine
// turns block tables into slot mappings:
//   slot(position) = table[position / block_size] * block_size + position % block_size
//
// A table only grows at its end (or is cut back by truncate), so a full block
// is never written again and can stay shared between sequences and the prefix
// cache. Only a partially filled block can be written while shared (after a
// fork or a rollback); that write first moves the sequence to a private copy
// and reports the (src, dst) pair for the engine to copy.
//
// With a window W (every layer of the model attends to at most the last W
// positions, itself included), a query at position p reads no key before
// p - W + 1. A sequence's blocks that lie wholly before the window of its next
// query position are released and their table entries become kNoBlock (the
// table keeps its indexing; the kernels never read keys outside a window).
// Releasing drops the sequence's reference only: a cached block stays
// findable until it is evicted, like the blocks of a finished sequence.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvcache/block_pool.h"
#include "kvcache/ids.h"

namespace exactly {

struct PrefixHit {
  // [num_hit_blocks] cached blocks holding the prompt's first tokens; kNoBlock
  // for those before the window of the first token left to compute.
  std::vector<BlockId> blocks;
  int64_t num_tokens = 0;  // num_hit_blocks * block_size
};

// Copy block src's KV into block dst before the forward pass. Pairs must be
// applied in the order given: a later pair may reuse an earlier src as dst.
struct BlockCopy {
  BlockId src;
  BlockId dst;
};

struct KVCacheStats {
  int32_t total_blocks = 0;
  int32_t used_blocks = 0;         // at least one reference
  int32_t free_blocks = 0;         // no reference (cached ones included)
  int32_t cached_blocks = 0;       // in the prefix cache, used or free
  int64_t prefix_query_tokens = 0; // tokens of sequences started with a prefix lookup
  int64_t prefix_hit_tokens = 0;   // of those, tokens found in the cache
  int64_t reserved_tokens = 0;     // token slots the sequences hold (shared blocks count once per sequence,
                                   // released ones not at all)
  int64_t used_slots = 0;          // used_blocks * block_size
};

class KVCacheManager {
 public:
  // window: the model's KV window (ModelConfig::kv_window), 0 for none.
  KVCacheManager(int32_t num_blocks, int32_t block_size, bool enable_prefix_caching = true, int32_t window = 0);

  int32_t block_size() const { return pool_.block_size(); }
  int32_t num_blocks() const { return pool_.num_blocks(); }
  int32_t num_free_blocks() const { return pool_.num_free_blocks(); }
  bool prefix_caching_enabled() const { return enable_prefix_caching_; }
  int32_t window() const { return window_; }
  // Blocks a sequence of `num_tokens` tokens occupies.
  int64_t blocks_for_tokens(int64_t num_tokens) const;
  // The most blocks a sequence of up to `num_tokens` tokens holds at once when
  // a step computes at most `max_step_tokens` of them: all its blocks, or
  // with a window those spanning the window of a step's first query and the
  // step's tokens.
  int64_t max_blocks_held(int64_t num_tokens, int64_t max_step_tokens) const;

  // The longest prefix of `tokens` in full blocks whose blocks the next query
  // reads are all cached under that prefix's hash chain: every block, or with
  // a window those of the window (the chain is computed from the tokens, so
  // blocks evicted before it do not break the hit). At least one token is
  // always left to compute (the model needs the last token's logits), so a
  // prompt found whole gives back its last block. Changes nothing.
  PrefixHit find_cached_prefix(std::span<const int32_t> tokens) const;

  // Starts `seq` with the blocks of `hit` and room for `num_new_tokens` more.
  // `tokens` are the sequence's known tokens (counted in the prefix statistics).
  // Blocks before the window of the first new token are not taken.
  // All or nothing: false, with nothing changed, when the free blocks (cached
  // ones count as free) do not suffice.
  [[nodiscard]] bool allocate_new(SeqId seq, std::span<const int32_t> tokens, const PrefixHit& hit,
                                  int64_t num_new_tokens);

  // Makes room in `seq` for tokens [num_computed_tokens, num_computed_tokens +
  // num_new_tokens), copying any shared block they land in (pairs appended to
  // `copies`). First releases the blocks before the window of position
  // num_computed_tokens (whatever follows: no query reads them again); the
  // rest is all or nothing, like allocate_new.
  [[nodiscard]] bool allocate(SeqId seq, int64_t num_computed_tokens, int64_t num_new_tokens,
                              std::vector<BlockCopy>& copies);

  // After a forward pass: `tokens[0, num_computed_tokens)` have their KV in
  // the cache. Full blocks among them join the prefix cache. Only verified
  // tokens may be committed; truncate drops commitments beyond its length.
  void commit_computed(SeqId seq, std::span<const int32_t> tokens, int64_t num_computed_tokens);

  // `child` starts with all of `parent`'s blocks, shared.
  void fork(SeqId parent, SeqId child);
  // Keeps only the first `num_tokens` tokens (speculative rollback). The
  // window of position num_tokens must still be held.
  void truncate(SeqId seq, int64_t num_tokens);
  // Releases every block of `seq`; cached ones stay findable until evicted.
  void free(SeqId seq);

  bool contains(SeqId seq) const { return seqs_.count(seq) != 0; }
  // [blocks_for_tokens(num_reserved_tokens)]; kNoBlock where released out of the window.
  std::span<const BlockId> block_table(SeqId seq) const;
  // Tokens `seq` has room for.
  int64_t num_reserved_tokens(SeqId seq) const;
  size_t num_seqs() const { return seqs_.size(); }

  KVCacheStats stats() const;
  const BlockPool& pool() const { return pool_; }

  // Aborts with a message unless every invariant holds: reference counts equal
  // table references, the free list is exactly the unreferenced blocks, the
  // hash map agrees with the blocks, each table fits its reserved tokens,
  // released entries are a leading run before the window, and each
  // sequence's hash chain matches the cached blocks it holds.
  void check_integrity() const;

 private:
  struct Sequence {
    std::vector<BlockId> table;     // [num_blocks] physical block of each logical block, or kNoBlock
    std::vector<BlockHash> hashes;  // [num_committed_blocks] prefix-hash chain of committed full blocks
    int64_t num_tokens = 0;         // tokens the table has room for
    size_t first_held = 0;          // table[0, first_held) were released out of the window
  };

  Sequence& sequence(SeqId seq);
  const Sequence& sequence(SeqId seq) const;
  // The first block a query at `position` may read: blocks before it lie
  // wholly before its window (0 without a window).
  size_t first_needed_block(int64_t position) const;
  void release_before_window(Sequence& s, int64_t position);
  void release_from(Sequence& s, size_t first_block);

  BlockPool pool_;
  bool enable_prefix_caching_;
  int32_t window_;
  std::unordered_map<SeqId, Sequence> seqs_;
  int64_t prefix_query_tokens_ = 0;
  int64_t prefix_hit_tokens_ = 0;
};

}  // namespace exactly
