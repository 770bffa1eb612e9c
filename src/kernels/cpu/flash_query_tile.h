// FlashAttention over one query tile: the query heads of one KV group for a
// run of consecutive query tokens of one sequence (GQA rows packed together so
// each key and value tile is loaded once for all of them).
//
// Keys are walked in fixed split-KV partitions of kPartitionKeys positions
// (boundaries at multiples of it, counted from position 0), each in KV tiles of
// kKeyTile keys in increasing order. Every partition yields a row state
// (m, l, acc); the partitions are merged by merge_partition in increasing
// order, whether they were computed one after another by one thread (prefill)
// or in parallel (split-KV decode). A row's operations thus depend only on its
// query, its key limit and the keys: never on the tile, the batch or the thread.
#pragma once

#include <cstdint>

#include "kernels/cpu/flash_tile.h"
#include "kernels/ops.h"

namespace exactly::kernels::cpu::flash {

constexpr int kPartitionKeys = 512;  // fixed: never depends on the batch or the thread count
static_assert(kPartitionKeys % kKeyTile == 0);
constexpr int kTileRowsTarget = 48;  // rows (tokens x group heads) per query tile

// Everything a call shares.
struct FlashProblem {
  PagedKV cache;
  AttentionBatch batch;
  const float* q;  // [n_tokens, n_heads, head_dim]
  float* out;      // [n_tokens, n_heads, head_dim]
  int n_heads;
  int group;      // query heads per KV head
  float q_scale;  // scale * log2(e): scores are kept in the log2 domain
  bool causal;
  int32_t window;  // > 0: a row at position p sees keys from p - window + 1 (causal only)
  const float* sinks = nullptr;  // [n_heads] logits that join each row's denominator (natural log), or none
};

struct QueryTile {
  int32_t seq;
  int32_t first_token;  // index in the flattened batch
  int32_t n_tokens;
  int32_t first_pos;  // context position of first_token
  int32_t kv_head;

  int rows(int group) const { return n_tokens * group; }
};

// Query tokens per tile for this group size, and the most rows a tile has.
inline int tokens_per_tile(int group) { return group >= kTileRowsTarget ? 1 : kTileRowsTarget / group; }
inline int max_tile_rows(int group) { return tokens_per_tile(group) * group; }

// Last key position any row of the tile attends to, and the first.
int32_t last_key(const FlashProblem& p, const QueryTile& t);
int32_t first_key(const FlashProblem& p, const QueryTile& t);
// The tile's partitions: first_partition .. partitions_of - 1 (earlier ones
// lie wholly before every row's sliding window).
inline int32_t partitions_of(const FlashProblem& p, const QueryTile& t) {
  return last_key(p, t) / kPartitionKeys + 1;
}
inline int32_t first_partition(const FlashProblem& p, const QueryTile& t) {
  return first_key(p, t) / kPartitionKeys;
}

// Per-thread working memory of one query tile; sizes for max_tile_rows rows.
struct TileBuffers {
  float* qs;             // [rows, head_dim] scaled queries
  int32_t* key_limit;    // [rows] last key position of each row
  int32_t* key_first;    // [rows] first key position of each row (0 without a window)
  int32_t* n_valid;      // [rows] valid keys of each row in the current KV tile: [first_valid, n_valid)
  int32_t* first_valid;  // [rows]
  TileScratch tile;      // see flash_tile.h
  float* zero_row;       // [head_dim] zeros: the key and value read for positions before every row's window
  RowState partition;    // state over the current partition
  RowState merged;       // merge of the partitions so far
};
// Bytes of one TileBuffers and the carving of a buffer of that size (64-byte aligned).
int64_t tile_buffer_bytes(int group, int head_dim);
TileBuffers carve_tile_buffers(void* memory, int group, int head_dim);

// Bytes of one partition's row state in a split-KV partial slot.
inline int64_t partial_floats(int rows, int head_dim) { return int64_t{rows} * (head_dim + 2); }
RowState partial_state(float* slot, int rows, int head_dim);  // slot: [partial_floats]

// Fills buf.qs, buf.key_limit and buf.key_first for the tile.
void load_tile(const FlashProblem& p, const QueryTile& t, TileBuffers& buf);

// The row state of partition `part` of the tile into `state` (needs load_tile).
void attend_partition(const FlashProblem& p, const QueryTile& t, int32_t part, TileBuffers& buf, RowState state);

// Folds partition `part`'s state into `merged` (rows that see no key of the
// partition are left alone). Start `merged` with reset_state.
void reset_state(RowState s, int rows, int head_dim);
void merge_partition(RowState merged, RowState part_state, int32_t part, const int32_t* key_first,
                     const int32_t* key_limit, int rows, int head_dim);

// out rows = merged acc / merged l (with a sink: / (l + exp(sink - m)), in
// the log2 domain of the scores).
void write_tile_output(const FlashProblem& p, const QueryTile& t, RowState merged);

// The whole tile: all partitions in order, merged, written to p.out.
void attend_query_tile(const FlashProblem& p, const QueryTile& t, TileBuffers& buf);

}  // namespace exactly::kernels::cpu::flash
