// FlashAttention over the paged KV cache: tiled prefill and split-KV decode
// in one plan.
//
// The work is a list of query tiles (flash_query_tile.h). A tile of a
// sequence with few query tokens (a decode step, a short speculative verify)
// whose keys span several fixed 512-key partitions is split: each partition
// is one work item writing a partial row state, and a second pass merges the
// partials in increasing partition order (flash-decoding). Every other tile
// walks its partitions in order itself, merging as it goes. Both routes run
// the same operations on every row, so the choice, the batch and the thread
// count never change a bit of the output.
//
// Scratch: one TileBuffers per thread (independent of the sequence length)
// plus, for split tiles only, one partial state per partition.
#include <algorithm>
#include <atomic>
#include <cmath>
#include <memory>
#include <vector>

#include "kernels/cpu/attention_layout.h"
#include "kernels/cpu/flash_query_tile.h"
#include "kernels/ops.h"

namespace exactly::kernels {

namespace {

using cpu::flash::QueryTile;

struct WorkItem {
  QueryTile tile;
  int32_t part;   // partition to compute into the partial slot, or -1: the whole tile
  int64_t slot;   // float offset of the partial state in the partials area
  int64_t cost;   // rows x keys, to hand out the longest items first
};

struct SplitTile {
  QueryTile tile;
  int32_t first_part;  // partitions first_part .. first_part + n_parts - 1
  int32_t n_parts;
  int64_t slot;  // float offset of partition first_part's partial state; the others follow
};

struct Plan {
  std::vector<WorkItem> items;
  std::vector<SplitTile> splits;
  int64_t partial_floats = 0;
};

cpu::flash::FlashProblem make_problem(const PagedKV& cache, const AttentionBatch& batch, const float* q, int n_heads,
                                      float scale, float* out, AttentionMask mask, int32_t window,
                                      const float* sinks = nullptr) {
  constexpr float kLog2e = 1.44269504088896341f;
  return {cache, batch, q, out, n_heads, n_heads / cache.n_kv_heads, scale * kLog2e, mask == AttentionMask::causal,
          window, sinks};
}

// Query tokens per tile of each sequence. Whole tiles of tokens_per_tile
// unless they make fewer work items than two per thread (a lone 9-token
// verify over 3 KV heads is 3 items for 2 threads): then each sequence's
// tokens are cut into more, equal tiles. A row's result never depends on the
// rows it shares a tile with, so this changes no bit.
std::vector<int32_t> tile_tokens(const cpu::flash::FlashProblem& p, int n_threads) {
  const int per_tile = cpu::flash::tokens_per_tile(p.group);
  std::vector<int32_t> tokens(static_cast<size_t>(p.batch.n_seqs));
  int64_t items = 0;
  for (int32_t s = 0; s < p.batch.n_seqs; ++s) {
    const int32_t n_new = p.batch.query_start[s + 1] - p.batch.query_start[s];
    items += (n_new + per_tile - 1) / per_tile * p.cache.n_kv_heads;
  }
  const int64_t wanted = 2 * int64_t{n_threads};
  const int64_t factor = items == 0 || items >= wanted ? 1 : (wanted + items - 1) / items;
  for (int32_t s = 0; s < p.batch.n_seqs; ++s) {
    const int32_t n_new = p.batch.query_start[s + 1] - p.batch.query_start[s];
    const int64_t tiles = std::min<int64_t>(n_new, (n_new + per_tile - 1) / per_tile * factor);
    tokens[static_cast<size_t>(s)] = tiles == 0 ? per_tile : static_cast<int32_t>((n_new + tiles - 1) / tiles);
  }
  return tokens;
}

Plan make_plan(const cpu::flash::FlashProblem& p, int n_threads) {
  Plan plan;
  const std::vector<int32_t> per_seq = tile_tokens(p, n_threads);
  const int hd = p.cache.head_dim;
  for (int32_t s = 0; s < p.batch.n_seqs; ++s) {
    const int32_t first = p.batch.query_start[s], n_new = p.batch.query_start[s + 1] - first;
    const int32_t first_pos = p.batch.seq_lens[s] - n_new;
    const int32_t per_tile = per_seq[static_cast<size_t>(s)];
    for (int32_t t0 = 0; t0 < n_new; t0 += per_tile)
      for (int32_t h = 0; h < p.cache.n_kv_heads; ++h) {
        const QueryTile tile{s, first + t0, std::min(per_tile, n_new - t0), first_pos + t0, h};
        const int32_t first_part = cpu::flash::first_partition(p, tile);
        const int32_t n_parts = cpu::flash::partitions_of(p, tile) - first_part;
        const int64_t rows = tile.rows(p.group);
        const int64_t keys = cpu::flash::last_key(p, tile) + 1 - cpu::flash::first_key(p, tile);
        if (n_new > per_tile || n_parts == 1) {
          plan.items.push_back({tile, -1, 0, rows * keys});
          continue;
        }
        const int64_t slot_floats = cpu::flash::partial_floats(tile.rows(p.group), hd);
        plan.splits.push_back({tile, first_part, n_parts, plan.partial_floats});
        for (int32_t i = 0; i < n_parts; ++i)
          plan.items.push_back({tile, first_part + i, plan.partial_floats + i * slot_floats,
                                rows * cpu::flash::kPartitionKeys});
        plan.partial_floats += n_parts * slot_floats;
      }
  }
  std::stable_sort(plan.items.begin(), plan.items.end(),
                   [](const WorkItem& a, const WorkItem& b) { return a.cost > b.cost; });
  return plan;
}

// Runs fn(index, buffers) for index in [0, n), handed out one at a time.
template <class Fn>
void for_each_dynamic(ThreadPool& pool, int64_t n, std::byte* scratch, int64_t tile_bytes, int group, int hd, Fn&& fn) {
  if (n == 0) return;
  std::atomic<int64_t> next{0};
  pool.run_on_all([&](int thread) {
    cpu::flash::TileBuffers buf = cpu::flash::carve_tile_buffers(scratch + thread * tile_bytes, group, hd);
    for (int64_t i = next.fetch_add(1); i < n; i = next.fetch_add(1)) fn(i, buf);
  });
}

}  // namespace

int64_t attention_scratch_bytes(const PagedKV& cache, const AttentionBatch& batch, int n_heads, int n_threads,
                                AttentionMask mask, int32_t window) {
  const cpu::flash::FlashProblem p = make_problem(cache, batch, nullptr, n_heads, 1.0f, nullptr, mask, window);
  return n_threads * cpu::flash::tile_buffer_bytes(p.group, cache.head_dim) +
         make_plan(p, n_threads).partial_floats * static_cast<int64_t>(sizeof(float));
}

void attention(const PagedKV& cache, const AttentionBatch& batch, const float* q, int n_heads, float scale,
               float* out, ThreadPool& pool, AttentionMask mask, int32_t window, const float* sinks) {
  cpu::check_attention(cache, batch, n_heads);
  EXACTLY_CHECK(window >= 0 && (window == 0 || mask == AttentionMask::causal),
                "attention: a sliding window (%d) needs the causal mask", window);
  for (int32_t s = 0; s < batch.n_seqs; ++s)
    EXACTLY_CHECK(batch.seq_lens[s] >= batch.query_start[s + 1] - batch.query_start[s],
                  "attention: sequence %d has more new tokens than its length %d", s, batch.seq_lens[s]);
  const cpu::flash::FlashProblem p = make_problem(cache, batch, q, n_heads, scale, out, mask, window, sinks);
  const Plan plan = make_plan(p, pool.size());
  const int hd = cache.head_dim;
  const int64_t tile_bytes = cpu::flash::tile_buffer_bytes(p.group, hd);
  const int64_t bytes = attention_scratch_bytes(cache, batch, n_heads, pool.size(), mask, window);
  const std::unique_ptr<std::byte[]> scratch(new std::byte[static_cast<size_t>(bytes)]);
  float* partials = reinterpret_cast<float*>(scratch.get() + pool.size() * tile_bytes);

  for_each_dynamic(pool, static_cast<int64_t>(plan.items.size()), scratch.get(), tile_bytes, p.group, hd,
                   [&](int64_t i, cpu::flash::TileBuffers& buf) {
                     const WorkItem& w = plan.items[static_cast<size_t>(i)];
                     if (w.part < 0) {
                       cpu::flash::attend_query_tile(p, w.tile, buf);
                       return;
                     }
                     cpu::flash::load_tile(p, w.tile, buf);
                     const int rows = w.tile.rows(p.group);
                     cpu::flash::attend_partition(p, w.tile, w.part, buf,
                                                  cpu::flash::partial_state(partials + w.slot, rows, hd));
                   });
  for_each_dynamic(pool, static_cast<int64_t>(plan.splits.size()), scratch.get(), tile_bytes, p.group, hd,
                   [&](int64_t i, cpu::flash::TileBuffers& buf) {
                     const SplitTile& st = plan.splits[static_cast<size_t>(i)];
                     const int rows = st.tile.rows(p.group);
                     cpu::flash::load_tile(p, st.tile, buf);
                     cpu::flash::reset_state(buf.merged, rows, hd);
                     for (int32_t k = 0; k < st.n_parts; ++k)
                       cpu::flash::merge_partition(
                           buf.merged,
                           cpu::flash::partial_state(partials + st.slot + k * cpu::flash::partial_floats(rows, hd),
                                                     rows, hd),
                           st.first_part + k, buf.key_first, buf.key_limit, rows, hd);
                     cpu::flash::write_tile_output(p, st.tile, buf.merged);
                   });
}

}  // namespace exactly::kernels
