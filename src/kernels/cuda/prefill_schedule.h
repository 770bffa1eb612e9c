// The order in which the persistent Hopper prefill kernel
// (flash_prefill_sm90_ws.cuh) hands out its work, as plain arithmetic that
// the host can check: which (sequence, head) and query block the i-th index
// is, and which stretch of its key tiles. An item is CLUSTER consecutive
// query blocks of one (sequence, head), one per CTA of a cluster, sharing
// its K/V tiles; a (sequence, head)'s items go from its last query block
// (the most keys under a causal mask) to its first.
#pragma once

#include <algorithm>
#include <cstddef>
#include <cstdint>

#if defined(__CUDACC__)
#define EXACTLY_HOST_DEVICE __host__ __device__
#else
#define EXACTLY_HOST_DEVICE
#endif

namespace exactly::kernels::cuda {

// The work items of a launch and the counter that hands them out.
struct Sm90WsSchedule {
  int32_t n_mblocks;  // blocks of 128 query rows per (sequence, head): the longest query's
  int32_t n_items;    // indices handed out: sequences x heads x ceil(n_mblocks / CLUSTER), pieces counted apart
  // [2]: items handed out after each cluster's first, clusters done; zero
  // between launches. Null: a plain grid, one item per cluster.
  int32_t* counter;
  // The last tail_heads (sequence, head)s hand out their items longest
  // first across all of them (sm90_ws_tail_heads); 0: none.
  int32_t tail_heads = 0;
  // The last split_items items run as split_pieces pieces each, over
  // consecutive stretches of their key tiles (sm90_ws_split). Each piece
  // leaves its unnormalised output, row maxima and sums in partials; the
  // last piece of a warp's rows to arrive (counted in arrivals, which it
  // zeroes again) merges them all in piece order.
  int32_t split_items = 0;
  int32_t split_pieces = 1;
  float* partials = nullptr;    // [piece][query block][chunk][consumer thread] float4 (Sm90WsPartial)
  int32_t* arrivals = nullptr;  // [split item][query block][consumer warp], zero between launches
};

// A piece's partial result, per consumer thread: its D / 2 output values in
// D / 8 float4s, then its two rows' raw maxima and sums in one more;
// kBytesPerCta for two consumer warpgroups.
template <int D>
struct Sm90WsPartial {
  static constexpr int kChunks = D / 8 + 1;
  static constexpr size_t kBytesPerCta = size_t{kChunks} * 256 * 16;
};

// Under a causal mask a head's items shrink from its last query block to its
// first, so handing out one head after another ends a launch with some
// clusters still on long items from the last heads while the rest have
// nothing left: modelled, 3% of the time at 1k-8k tokens and 13% for one
// 4k sequence. Ordering the last heads' items longest first across them
// (the longest-processing-time rule) leaves short items for the end; four
// items per cluster in that stretch bring the modelled loss under 1% at
// those shapes (1.7% for one 4k sequence) while the stretch's K/V stays
// within L2. Without a mask every item is as long: see sm90_ws_split.
inline int32_t sm90_ws_tail_heads(int64_t n_seq_heads, int per_head, int clusters, bool causal) {
  if (!causal || per_head <= 1) return 0;
  return static_cast<int32_t>(std::min<int64_t>(n_seq_heads, (4 * int64_t{clusters} + per_head - 1) / per_head));
}

// Without a mask every item is as long, so n_items % clusters of them are left
// for a last round that the other clusters sit out: 3% of the time when
// 4096 items meet 132 SMs (31 rounds and 4 items). Split into pieces over
// stretches of their keys, those items end with the rest, for the cost of
// writing and merging partial outputs. Pieces of at least four tiles, at most
// one per cluster, and at most 16 of an item (the last to finish reads all
// of them: about half a microsecond each). Sets split_items and split_pieces
// (none without a workspace) and returns the indices to hand out.
inline int64_t sm90_ws_split(Sm90WsSchedule& sched, int64_t n_items, int clusters, int max_tiles, bool causal) {
  sched.split_items = 0;
  sched.split_pieces = 1;
  if (causal || sched.partials == nullptr || sched.arrivals == nullptr || clusters <= 0) return n_items;
  const int64_t left = n_items % clusters;
  if (left == 0 || n_items < clusters) return n_items;
  const int64_t pieces = std::min<int64_t>({clusters / left, max_tiles / 4, 16});
  if (pieces < 2) return n_items;
  sched.split_items = static_cast<int32_t>(left);
  sched.split_pieces = static_cast<int32_t>(pieces);
  return n_items - left + left * pieces;
}

// Index i of a launch: its (sequence, head) (sequence x heads + head), its
// item's rank among that head's (0: the last query blocks), and, for a
// piece, which of how many (piece: its index among all split items' pieces,
// -1 for a whole item). In the last sched.tail_heads (sequence, head)s, rank
// r of each in turn, then rank r + 1.
struct Sm90WsSlot {
  int seq_head, rank, part, parts, piece;
};
EXACTLY_HOST_DEVICE inline Sm90WsSlot sm90_ws_slot(int i, const Sm90WsSchedule& sched, int cluster) {
  const int split_from = sched.n_items - sched.split_items * sched.split_pieces;
  const int piece = i >= split_from ? i - split_from : -1;
  const int item = piece >= 0 ? split_from + piece / sched.split_pieces : i;
  const int per_head = (sched.n_mblocks + cluster - 1) / cluster;
  const int n_seq_heads = (split_from + sched.split_items) / per_head;
  const int head_items = (n_seq_heads - sched.tail_heads) * per_head;
  Sm90WsSlot s{item / per_head, item % per_head, 0, 1, piece};
  if (item >= head_items) {
    const int j = item - head_items;
    s.seq_head = n_seq_heads - sched.tail_heads + j % sched.tail_heads;
    s.rank = j / sched.tail_heads;
  }
  if (piece >= 0) {
    s.part = piece % sched.split_pieces;
    s.parts = sched.split_pieces;
  }
  return s;
}

// Part `part` of `parts` of an item's `tiles` key tiles: [first, end). The
// parts cover the tiles in order; with fewer tiles than parts, tiles of them
// hold one tile each and the rest none.
EXACTLY_HOST_DEVICE inline int sm90_ws_part_first(int tiles, int part, int parts) { return tiles * part / parts; }
EXACTLY_HOST_DEVICE inline int sm90_ws_part_end(int tiles, int part, int parts) { return tiles * (part + 1) / parts; }

}  // namespace exactly::kernels::cuda
