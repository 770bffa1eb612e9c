// The physical KV blocks: reference counts, a free list ordered least recently
// used first, and the prefix cache (hash -> block).
//
// A block whose count drops to zero keeps its hash and stays findable until it
// is reused: free blocks are reused from the front of the list (evicting
// their hash then), freed ones join the back, so the cache forgets the least
// recently used prefixes first. The free list is threaded through the block
// array itself, so taking a cached block out of its middle is O(1).
#pragma once

#include <cstdint>
#include <optional>
#include <span>
#include <unordered_map>
#include <vector>

#include "kvcache/block_hash.h"
#include "kvcache/ids.h"

namespace exactly {

class BlockPool {
 public:
  BlockPool(int32_t num_blocks, int32_t block_size);

  int32_t num_blocks() const { return static_cast<int32_t>(blocks_.size()); }
  int32_t block_size() const { return block_size_; }
  // Blocks with no reference, cached ones included (they can be evicted).
  int32_t num_free_blocks() const { return num_free_; }
  // Blocks registered in the prefix cache, in use or free.
  int32_t num_cached_blocks() const { return static_cast<int32_t>(by_hash_.size()); }

  int32_t ref_count(BlockId block) const;
  std::optional<BlockHash> hash_of(BlockId block) const;
  // The tokens a cached block holds; only meaningful while hash_of() has a value.
  std::span<const int32_t> tokens_of(BlockId block) const;

  // The cached block holding `tokens` right after the prefix named `parent`,
  // verified against the stored parent and tokens (not only the hash).
  std::optional<BlockId> find(BlockHash parent, std::span<const int32_t> tokens) const;

  // Takes the least recently used free block with one reference, evicting its
  // hash. The caller makes sure num_free_blocks() > 0.
  BlockId take_free();
  // One more reference; a free block (a cache hit) leaves the free list.
  void acquire(BlockId block);
  // One reference fewer; at zero the block joins the back of the free list and
  // keeps its hash.
  void release(BlockId block);

  // Records that a full block holds `tokens` after `parent`. Returns false and
  // records nothing when another block already holds that prefix (two
  // sequences computed the same block at once); re-registering a block with
  // the hash it has is a no-op that returns true.
  bool register_hash(BlockId block, BlockHash parent, std::span<const int32_t> tokens);
  // The block is about to be overwritten: it must no longer be found.
  void forget_hash(BlockId block);

  // Free blocks in eviction order, front first.
  std::vector<BlockId> free_list() const;

  // Aborts with a message unless links, counts and the hash map agree.
  void check_integrity() const;

 private:
  struct Block {
    int32_t ref_count = 0;
    bool in_free_list = false;
    BlockId prev_free = kNoBlock;  // towards the least recently used end
    BlockId next_free = kNoBlock;  // towards the most recently used end
    bool has_hash = false;
    BlockHash hash = 0;
    BlockHash parent_hash = 0;
  };

  void check_block(BlockId block) const;
  void unlink_free(BlockId block);
  void push_back_free(BlockId block);

  int32_t block_size_;
  std::vector<Block> blocks_;    // [num_blocks]
  std::vector<int32_t> tokens_;  // [num_blocks, block_size] tokens of cached blocks
  BlockId free_head_ = kNoBlock;  // next block to reuse
  BlockId free_tail_ = kNoBlock;  // most recently freed
  int32_t num_free_ = 0;
  std::unordered_map<BlockHash, BlockId> by_hash_;
};

}  // namespace exactly
