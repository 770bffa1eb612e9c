// The Hopper prefill kernel's work order (kernels/cuda/prefill_schedule.h),
// checked on the host: every query block of every (sequence, head) is handed
// out exactly once, whole or as pieces that cover its key tiles in order;
// the tail of a causal launch goes longest first; and, in a model of the
// kernel's counter (each cluster takes the next index when it finishes), the
// two end-of-launch rules do what they are for.
#include "kernels/cuda/prefill_schedule.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <functional>
#include <queue>
#include <random>
#include <vector>

namespace exactly::kernels::cuda {
namespace {

struct Launch {
  Sm90WsSchedule sched{};
  int cluster = 1, per_head = 0, n_seq_heads = 0, indices = 0;
};

// As the launcher builds it; `workspace` stands for the partials buffer.
Launch make_launch(int n_seq_heads, int n_mblocks, int cluster, int clusters, bool causal, int max_tiles,
                   bool workspace = true) {
  static float partials;
  static int32_t arrivals;
  Launch l;
  l.cluster = cluster;
  l.per_head = (n_mblocks + cluster - 1) / cluster;
  l.n_seq_heads = n_seq_heads;
  l.sched.n_mblocks = n_mblocks;
  l.sched.tail_heads = sm90_ws_tail_heads(n_seq_heads, l.per_head, clusters, causal);
  if (workspace) {
    l.sched.partials = &partials;
    l.sched.arrivals = &arrivals;
  }
  l.indices = static_cast<int>(sm90_ws_split(l.sched, int64_t{l.per_head} * n_seq_heads, clusters, max_tiles, causal));
  l.sched.n_items = l.indices;
  return l;
}

TEST(PrefillSchedule, EveryItemOnceWholeOrInPiecesThatCoverItsTiles) {
  std::mt19937 rng(7);
  for (int trial = 0; trial < 3000; ++trial) {
    const int n_seq_heads = 1 + static_cast<int>(rng() % 400);
    const int n_mblocks = 1 + static_cast<int>(rng() % 40);
    const int cluster = 1 + static_cast<int>(rng() % 2);
    const int clusters = 1 + static_cast<int>(rng() % 132);
    const bool causal = rng() % 2 == 0;
    const int max_tiles = 1 + static_cast<int>(rng() % 130);
    const Launch l = make_launch(n_seq_heads, n_mblocks, cluster, clusters, causal, max_tiles);
    SCOPED_TRACE(::testing::Message() << n_seq_heads << " heads x " << n_mblocks << " blocks, cluster " << cluster
                                      << ", " << clusters << " clusters, causal " << causal);
    // whole[item]: handed out whole; parts[item]: which parts were handed out.
    const int items = l.per_head * n_seq_heads;
    std::vector<int> whole(items, 0);
    std::vector<std::vector<int>> parts(items);
    for (int i = 0; i < l.indices; ++i) {
      const Sm90WsSlot s = sm90_ws_slot(i, l.sched, cluster);
      ASSERT_GE(s.seq_head, 0);
      ASSERT_LT(s.seq_head, n_seq_heads);
      ASSERT_GE(s.rank, 0);
      ASSERT_LT(s.rank, l.per_head);
      const int item = s.seq_head * l.per_head + s.rank;
      if (s.piece < 0) {
        ++whole[item];
      } else {
        ASSERT_EQ(s.parts, l.sched.split_pieces);
        ASSERT_EQ(s.piece, i - (l.indices - l.sched.split_items * l.sched.split_pieces));
        parts[item].push_back(s.part);
      }
    }
    for (int item = 0; item < items; ++item) {
      if (parts[item].empty()) {
        ASSERT_EQ(whole[item], 1) << "item " << item;
        continue;
      }
      ASSERT_EQ(whole[item], 0) << "item " << item << " both whole and in pieces";
      std::vector<int> want(l.sched.split_pieces);
      for (int p = 0; p < l.sched.split_pieces; ++p) want[p] = p;
      ASSERT_EQ(parts[item], want) << "item " << item << ": its pieces, in order, each once";
    }
  }
}

TEST(PrefillSchedule, PartsCoverTheTilesInOrder) {
  for (int tiles = 1; tiles <= 200; ++tiles) {
    for (int parts = 1; parts <= 16; ++parts) {
      int next = 0, nonempty = 0;
      for (int part = 0; part < parts; ++part) {
        const int first = sm90_ws_part_first(tiles, part, parts), end = sm90_ws_part_end(tiles, part, parts);
        ASSERT_EQ(first, next);
        ASSERT_GE(end, first);
        nonempty += end > first;
        next = end;
      }
      ASSERT_EQ(next, tiles);
      // The merge waits for this many arrivals: every non-empty piece's.
      ASSERT_EQ(nonempty, std::min(tiles, parts));
    }
  }
}

TEST(PrefillSchedule, SplitsOnlyTheLastRoundWithoutAMaskAndOnlyWithAWorkspace) {
  for (const bool causal : {false, true}) {
    for (const bool workspace : {false, true}) {
      // 4 x 32 heads x 32 blocks: 4096 items for 132 SMs leave 4.
      const Launch l = make_launch(128, 32, 1, 132, causal, 32, workspace);
      if (causal || !workspace) {
        EXPECT_EQ(l.sched.split_items, 0);
        EXPECT_EQ(l.indices, 4096);
      } else {
        EXPECT_EQ(l.sched.split_items, 4);
        EXPECT_EQ(l.sched.split_pieces, 8);  // 32 tiles in pieces of 4
        EXPECT_EQ(l.indices, 4092 + 4 * 8);
      }
    }
  }
  std::mt19937 rng(11);
  for (int trial = 0; trial < 3000; ++trial) {
    const int clusters = 1 + static_cast<int>(rng() % 132);
    const int max_tiles = 1 + static_cast<int>(rng() % 130);
    const Launch l = make_launch(1 + static_cast<int>(rng() % 400), 1 + static_cast<int>(rng() % 40), 1, clusters,
                                 false, max_tiles);
    if (l.sched.split_items == 0) continue;
    const int items = l.per_head * l.n_seq_heads;
    EXPECT_EQ(l.sched.split_items, items % clusters);
    EXPECT_GE(l.sched.split_pieces, 2);
    EXPECT_LE(l.sched.split_pieces, 16);
    EXPECT_LE(l.sched.split_items * l.sched.split_pieces, clusters);  // no piece waits for a cluster
    EXPECT_GE(max_tiles / l.sched.split_pieces, 4);                    // pieces of four tiles or more
  }
}

TEST(PrefillSchedule, TheCausalTailGoesLongestFirst) {
  // 16 x 32 heads of 1024 tokens in clusters of two: 4 items a head.
  const Launch l = make_launch(512, 8, 2, 66, true, 8);
  ASSERT_GT(l.sched.tail_heads, 0);
  const int head_items = (l.n_seq_heads - l.sched.tail_heads) * l.per_head;
  int last_rank = 0;
  for (int i = 0; i < l.indices; ++i) {
    const Sm90WsSlot s = sm90_ws_slot(i, l.sched, 2);
    if (i < head_items) {  // before the tail: head after head, as a plain grid
      EXPECT_EQ(s.seq_head, i / l.per_head);
      EXPECT_EQ(s.rank, i % l.per_head);
    } else {
      EXPECT_GE(s.rank, last_rank) << "index " << i;
      last_rank = s.rank;
    }
  }
  EXPECT_EQ(last_rank, l.per_head - 1);
}

// The time a launch takes in the model: indices in order, each to the
// cluster that frees first; an item costs its key tiles plus one.
double makespan(const Launch& l, int clusters, const std::function<int(const Sm90WsSlot&)>& tiles_of) {
  std::priority_queue<double, std::vector<double>, std::greater<>> free_at;
  for (int c = 0; c < clusters; ++c) free_at.push(0);
  double end = 0;
  for (int i = 0; i < l.indices; ++i) {
    const Sm90WsSlot s = sm90_ws_slot(i, l.sched, l.cluster);
    const int tiles = tiles_of(s);
    const int own = sm90_ws_part_end(tiles, s.part, s.parts) - sm90_ws_part_first(tiles, s.part, s.parts);
    const double t = free_at.top() + own + 1;
    free_at.pop();
    free_at.push(t);
    end = std::max(end, t);
  }
  return end;
}

TEST(PrefillSchedule, InTheModelALaunchEndsWithTheRest) {
  struct Shape {
    int seqs, blocks;
  };
  for (const Shape shape : {Shape{16, 8}, Shape{8, 16}, Shape{4, 32}, Shape{1, 32}, Shape{2, 64}}) {
    for (const int cluster : {1, 2}) {
      const int clusters = 132 / cluster, per_head = (shape.blocks + cluster - 1) / cluster;
      SCOPED_TRACE(::testing::Message() << shape.seqs << " x " << shape.blocks * 128 << ", cluster " << cluster);
      // Causal: an item's tiles are its last block's.
      auto causal_tiles = [&](const Sm90WsSlot& s) {
        return std::min((per_head - 1 - s.rank) * cluster + cluster, shape.blocks);
      };
      double work = 0;
      for (int r = 0; r < per_head; ++r) work += std::min((per_head - 1 - r) * cluster + cluster, shape.blocks) + 1;
      work *= shape.seqs * 32;
      Launch plain = make_launch(shape.seqs * 32, shape.blocks, cluster, clusters, true, shape.blocks);
      plain.sched.tail_heads = 0;
      const Launch tail = make_launch(shape.seqs * 32, shape.blocks, cluster, clusters, true, shape.blocks);
      const double ideal = work / clusters;
      const double before = makespan(plain, clusters, causal_tiles), after = makespan(tail, clusters, causal_tiles);
      EXPECT_LE(after, before);
      EXPECT_LT(after / ideal, 1.02) << "before " << before / ideal;
      // No mask: every item has all tiles; the split brings the end within
      // a piece and a tile of the ideal.
      auto all_tiles = [&](const Sm90WsSlot&) { return shape.blocks; };
      const Launch whole = make_launch(shape.seqs * 32, shape.blocks, cluster, clusters, false, shape.blocks, false);
      const Launch split = make_launch(shape.seqs * 32, shape.blocks, cluster, clusters, false, shape.blocks);
      const double full = double(per_head) * shape.seqs * 32 * (shape.blocks + 1) / clusters;
      const double piece = split.sched.split_items > 0 ? double(shape.blocks) / split.sched.split_pieces + 1 : 0;
      EXPECT_LE(makespan(split, clusters, all_tiles), makespan(whole, clusters, all_tiles));
      if (split.sched.split_items > 0) {
        EXPECT_LE(makespan(split, clusters, all_tiles), full + piece + 1);
      }
    }
  }
}

}  // namespace
}  // namespace exactly::kernels::cuda
