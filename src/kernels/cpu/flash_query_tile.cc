#include "kernels/cpu/flash_query_tile.h"

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <limits>

#include "kernels/cpu/flash_exp2.h"

namespace exactly::kernels::cpu::flash {

namespace {

// Hands out 64-byte aligned pieces of one buffer; with a null base it only
// measures, so sizing and carving cannot disagree.
class Carver {
 public:
  explicit Carver(std::byte* base) : base_(base) {}
  template <class T>
  T* take(int64_t count) {
    T* p = base_ ? reinterpret_cast<T*>(base_ + used_) : nullptr;
    used_ += (count * static_cast<int64_t>(sizeof(T)) + 63) / 64 * 64;
    return p;
  }
  int64_t used() const { return used_; }

 private:
  std::byte* base_;
  int64_t used_ = 0;
};

TileBuffers carve(Carver& c, int group, int hd) {
  const int rows = max_tile_rows(group);
  TileBuffers b;
  b.qs = c.take<float>(int64_t{rows} * hd);
  b.key_limit = c.take<int32_t>(rows);
  b.key_first = c.take<int32_t>(rows);
  b.n_valid = c.take<int32_t>(rows);
  b.first_valid = c.take<int32_t>(rows);
  b.tile.k_transposed = c.take<float>(int64_t{hd} * kKeyTile);
  b.tile.scores = c.take<float>(int64_t{rows} * kKeyTile);
  b.zero_row = c.take<float>(hd);
  for (RowState* s : {&b.partition, &b.merged}) {
    s->m = c.take<float>(rows);
    s->l = c.take<float>(rows);
    s->acc = c.take<float>(int64_t{rows} * hd);
  }
  return b;
}

}  // namespace

int32_t last_key(const FlashProblem& p, const QueryTile& t) {
  return p.causal ? t.first_pos + t.n_tokens - 1 : p.batch.seq_lens[t.seq] - 1;
}

int32_t first_key(const FlashProblem& p, const QueryTile& t) {
  return p.window > 0 ? std::max(0, t.first_pos - p.window + 1) : 0;
}

int64_t tile_buffer_bytes(int group, int head_dim) {
  Carver c(nullptr);
  carve(c, group, head_dim);
  return c.used();
}

TileBuffers carve_tile_buffers(void* memory, int group, int head_dim) {
  Carver c(static_cast<std::byte*>(memory));
  TileBuffers b = carve(c, group, head_dim);
  std::fill(b.zero_row, b.zero_row + head_dim, 0.0f);
  return b;
}

RowState partial_state(float* slot, int rows, int /*head_dim*/) {
  return {slot, slot + rows, slot + 2 * rows};
}

void load_tile(const FlashProblem& p, const QueryTile& t, TileBuffers& buf) {
  const int hd = p.cache.head_dim;
  const int32_t seq_last = p.batch.seq_lens[t.seq] - 1;
  for (int i = 0; i < t.n_tokens; ++i)
    for (int g = 0; g < p.group; ++g) {
      const int r = i * p.group + g;
      const float* q = p.q + ((int64_t{t.first_token} + i) * p.n_heads + t.kv_head * p.group + g) * hd;
      for (int d = 0; d < hd; ++d) buf.qs[int64_t{r} * hd + d] = q[d] * p.q_scale;
      buf.key_limit[r] = p.causal ? t.first_pos + i : seq_last;
      buf.key_first[r] = p.window > 0 ? std::max(0, t.first_pos + i - p.window + 1) : 0;
    }
}

void reset_state(RowState s, int rows, int head_dim) {
  std::fill(s.m, s.m + rows, -std::numeric_limits<float>::infinity());
  std::fill(s.l, s.l + rows, 0.0f);
  std::fill(s.acc, s.acc + int64_t{rows} * head_dim, 0.0f);
}

void attend_partition(const FlashProblem& p, const QueryTile& t, int32_t part, TileBuffers& buf, RowState state) {
  const int hd = p.cache.head_dim;
  const int rows = t.rows(p.group);
  reset_state(state, rows, hd);
  const int32_t end = std::min((part + 1) * kPartitionKeys, last_key(p, t) + 1);
  const int32_t first = first_key(p, t);
  const int32_t begin = std::max(part * kPartitionKeys, first / kKeyTile * kKeyTile);
  const float* keys[kKeyTile];
  const float* values[kKeyTile];
  for (int32_t j0 = begin; j0 < end; j0 += kKeyTile) {
    const int n_keys = std::min(kKeyTile, end - j0);
    // Walk the block table once per tile rather than dividing per key.
    const int bs = p.cache.block_size;
    const int32_t* table = p.batch.block_tables + int64_t{t.seq} * p.batch.max_blocks_per_seq;
    int32_t block = j0 / bs, in_block = j0 % bs;
    const int64_t row_stride = int64_t{p.cache.n_kv_heads} * hd;
    for (int j = 0; j < n_keys; ++j) {
      // Positions before every row's window are masked; their blocks may be
      // released (kNoBlock), so they read zeros instead of the table.
      if (j0 + j < first) {
        keys[j] = values[j] = buf.zero_row;
      } else {
        const int64_t off = (int64_t{table[block]} * bs + in_block) * row_stride + int64_t{t.kv_head} * hd;
        keys[j] = p.cache.k + off;
        values[j] = p.cache.v + off;
      }
      if (++in_block == bs) in_block = 0, ++block;
    }
    for (int r = 0; r < rows; ++r) {
      buf.first_valid[r] = std::clamp(buf.key_first[r] - j0, 0, kKeyTile);
      const int32_t n = std::clamp(buf.key_limit[r] + 1 - j0, 0, kKeyTile);
      buf.n_valid[r] = n > buf.first_valid[r] ? n : 0;  // a tile wholly outside the row's window is skipped
    }
    attend_kv_tile(buf.qs, rows, hd, buf.n_valid, p.window > 0 ? buf.first_valid : nullptr, keys, values, n_keys,
                   buf.tile, state);
  }
}

void merge_partition(RowState merged, RowState s, int32_t part, const int32_t* key_first, const int32_t* key_limit,
                     int rows, int hd) {
  for (int r = 0; r < rows; ++r) {
    // Rows that see no key of this partition keep their state as it is.
    if (key_limit[r] < part * kPartitionKeys || key_first[r] >= (part + 1) * kPartitionKeys) continue;
    const float m_new = std::max(merged.m[r], s.m[r]);
    const float a = exp2_fast(merged.m[r] - m_new), b = exp2_fast(s.m[r] - m_new);
    merged.l[r] = merged.l[r] * a + s.l[r] * b;
    merged.m[r] = m_new;
    float* acc = merged.acc + int64_t{r} * hd;
    const float* part_acc = s.acc + int64_t{r} * hd;
    int d = 0;
#if EXACTLY_KERNELS_AVX2
    const __m256 av = _mm256_set1_ps(a), bv = _mm256_set1_ps(b);
    for (; d + 8 <= hd; d += 8)
      _mm256_storeu_ps(acc + d, _mm256_fmadd_ps(_mm256_loadu_ps(acc + d), av,
                                                _mm256_mul_ps(_mm256_loadu_ps(part_acc + d), bv)));
#endif
    for (; d < hd; ++d) acc[d] = std::fma(acc[d], a, part_acc[d] * b);
  }
}

void write_tile_output(const FlashProblem& p, const QueryTile& t, RowState merged) {
  constexpr float kLog2e = 1.44269504088896341f;
  const int hd = p.cache.head_dim;
  for (int i = 0; i < t.n_tokens; ++i)
    for (int g = 0; g < p.group; ++g) {
      const int r = i * p.group + g;
      const int head = t.kv_head * p.group + g;
      float* out = p.out + ((int64_t{t.first_token} + i) * p.n_heads + head) * hd;
      const float* acc = merged.acc + int64_t{r} * hd;
      float l = merged.l[r], rescale = 1.0f;
      if (p.sinks != nullptr) {  // the sink as one more term of the row's sum, from the larger maximum
        const float sink = p.sinks[head] * kLog2e, m = std::max(merged.m[r], sink);
        rescale = std::exp2(merged.m[r] - m);
        l = l * rescale + std::exp2(sink - m);
      }
      int d = 0;
#if EXACTLY_KERNELS_AVX2
      const __m256 lv = _mm256_set1_ps(l), sv = _mm256_set1_ps(rescale);
      for (; d + 8 <= hd; d += 8)
        _mm256_storeu_ps(out + d, _mm256_div_ps(_mm256_mul_ps(_mm256_loadu_ps(acc + d), sv), lv));
#endif
      for (; d < hd; ++d) out[d] = acc[d] * rescale / l;
    }
}

void attend_query_tile(const FlashProblem& p, const QueryTile& t, TileBuffers& buf) {
  const int rows = t.rows(p.group), hd = p.cache.head_dim;
  load_tile(p, t, buf);
  reset_state(buf.merged, rows, hd);
  const int32_t n_parts = partitions_of(p, t);
  for (int32_t part = first_partition(p, t); part < n_parts; ++part) {
    attend_partition(p, t, part, buf, buf.partition);
    merge_partition(buf.merged, buf.partition, part, buf.key_first, buf.key_limit, rows, hd);
  }
  write_tile_output(p, t, buf.merged);
}

}  // namespace exactly::kernels::cpu::flash
