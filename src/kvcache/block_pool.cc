#include "kvcache/block_pool.h"

#include <algorithm>

#include "core/check.h"

namespace exactly {

BlockPool::BlockPool(int32_t num_blocks, int32_t block_size)
    : block_size_(block_size),
      blocks_(static_cast<size_t>(num_blocks)),
      tokens_(static_cast<size_t>(num_blocks) * static_cast<size_t>(block_size)) {
  EXACTLY_CHECK(num_blocks > 0 && block_size > 0, "block pool of %d blocks of %d tokens", num_blocks, block_size);
  for (BlockId b = 0; b < num_blocks; ++b) push_back_free(b);
}

void BlockPool::check_block(BlockId block) const {
  EXACTLY_CHECK(block >= 0 && block < num_blocks(), "block %d outside the pool of %d", block, num_blocks());
}

int32_t BlockPool::ref_count(BlockId block) const {
  check_block(block);
  return blocks_[block].ref_count;
}

std::optional<BlockHash> BlockPool::hash_of(BlockId block) const {
  check_block(block);
  if (!blocks_[block].has_hash) return std::nullopt;
  return blocks_[block].hash;
}

std::span<const int32_t> BlockPool::tokens_of(BlockId block) const {
  check_block(block);
  return std::span<const int32_t>(tokens_).subspan(static_cast<size_t>(block) * block_size_, block_size_);
}

std::optional<BlockId> BlockPool::find(BlockHash parent, std::span<const int32_t> tokens) const {
  auto it = by_hash_.find(hash_block(parent, tokens));
  if (it == by_hash_.end()) return std::nullopt;
  const BlockId block = it->second;
  if (blocks_[block].parent_hash != parent) return std::nullopt;
  std::span<const int32_t> stored = tokens_of(block);
  if (!std::equal(stored.begin(), stored.end(), tokens.begin(), tokens.end())) return std::nullopt;
  return block;
}

BlockId BlockPool::take_free() {
  EXACTLY_CHECK(free_head_ != kNoBlock, "no free block: the caller must check num_free_blocks() first");
  const BlockId block = free_head_;
  unlink_free(block);
  if (blocks_[block].has_hash) forget_hash(block);
  blocks_[block].ref_count = 1;
  return block;
}

void BlockPool::acquire(BlockId block) {
  check_block(block);
  if (blocks_[block].ref_count == 0) unlink_free(block);
  ++blocks_[block].ref_count;
}

void BlockPool::release(BlockId block) {
  check_block(block);
  EXACTLY_CHECK(blocks_[block].ref_count > 0, "releasing block %d which has no reference", block);
  if (--blocks_[block].ref_count == 0) push_back_free(block);
}

bool BlockPool::register_hash(BlockId block, BlockHash parent, std::span<const int32_t> tokens) {
  check_block(block);
  EXACTLY_CHECK(static_cast<int32_t>(tokens.size()) == block_size_, "a cached block holds %d tokens, not %zu",
                block_size_, tokens.size());
  const BlockHash hash = hash_block(parent, tokens);
  Block& b = blocks_[block];
  if (b.has_hash) {
    EXACTLY_CHECK(b.hash == hash, "block %d is cached with other contents", block);
    return true;
  }
  if (!by_hash_.emplace(hash, block).second) return false;
  b.has_hash = true;
  b.hash = hash;
  b.parent_hash = parent;
  std::copy(tokens.begin(), tokens.end(), tokens_.begin() + static_cast<ptrdiff_t>(block) * block_size_);
  return true;
}

void BlockPool::forget_hash(BlockId block) {
  check_block(block);
  Block& b = blocks_[block];
  if (!b.has_hash) return;
  by_hash_.erase(b.hash);
  b.has_hash = false;
}

std::vector<BlockId> BlockPool::free_list() const {
  std::vector<BlockId> order;
  order.reserve(static_cast<size_t>(num_free_));
  for (BlockId b = free_head_; b != kNoBlock && order.size() <= blocks_.size(); b = blocks_[b].next_free) {
    order.push_back(b);
  }
  return order;
}

void BlockPool::unlink_free(BlockId block) {
  Block& b = blocks_[block];
  EXACTLY_CHECK(b.in_free_list, "block %d is not in the free list", block);
  (b.prev_free == kNoBlock ? free_head_ : blocks_[b.prev_free].next_free) = b.next_free;
  (b.next_free == kNoBlock ? free_tail_ : blocks_[b.next_free].prev_free) = b.prev_free;
  b.prev_free = b.next_free = kNoBlock;
  b.in_free_list = false;
  --num_free_;
}

void BlockPool::push_back_free(BlockId block) {
  Block& b = blocks_[block];
  EXACTLY_CHECK(!b.in_free_list, "block %d is already in the free list", block);
  b.prev_free = free_tail_;
  b.next_free = kNoBlock;
  (free_tail_ == kNoBlock ? free_head_ : blocks_[free_tail_].next_free) = block;
  free_tail_ = block;
  b.in_free_list = true;
  ++num_free_;
}

void BlockPool::check_integrity() const {
  // Walk the list forwards, checking the backward links on the way.
  int32_t walked = 0;
  BlockId prev = kNoBlock;
  for (BlockId b = free_head_; b != kNoBlock; b = blocks_[b].next_free) {
    check_block(b);
    EXACTLY_CHECK(walked < num_blocks(), "the free list has a cycle");
    const Block& block = blocks_[b];
    EXACTLY_CHECK(block.in_free_list, "block %d is linked into the free list but not marked free", b);
    EXACTLY_CHECK(block.ref_count == 0, "block %d is in the free list with %d references", b, block.ref_count);
    EXACTLY_CHECK(block.prev_free == prev, "block %d links back to %d, not %d", b, block.prev_free, prev);
    prev = b;
    ++walked;
  }
  EXACTLY_CHECK(free_tail_ == prev, "the free list ends at %d but its tail is %d", prev, free_tail_);
  EXACTLY_CHECK(walked == num_free_, "the free list holds %d blocks but counts %d", walked, num_free_);

  int32_t zero_ref = 0, hashed = 0;
  for (BlockId b = 0; b < num_blocks(); ++b) {
    const Block& block = blocks_[b];
    EXACTLY_CHECK(block.ref_count >= 0, "block %d has %d references", b, block.ref_count);
    if (block.ref_count == 0) ++zero_ref;
    EXACTLY_CHECK(block.in_free_list == (block.ref_count == 0), "block %d: free-list flag %d with %d references", b,
                  block.in_free_list ? 1 : 0, block.ref_count);
    if (!block.has_hash) continue;
    ++hashed;
    auto it = by_hash_.find(block.hash);
    EXACTLY_CHECK(it != by_hash_.end() && it->second == b, "cached block %d is missing from the hash map", b);
    EXACTLY_CHECK(hash_block(block.parent_hash, tokens_of(b)) == block.hash,
                  "cached block %d: stored tokens do not match its hash", b);
  }
  EXACTLY_CHECK(zero_ref == num_free_, "%d blocks have no reference but %d are free", zero_ref, num_free_);
  EXACTLY_CHECK(hashed == num_cached_blocks(), "%d blocks carry a hash but the map has %d", hashed,
                num_cached_blocks());
}

}  // namespace exactly
