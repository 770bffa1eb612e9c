// Attention rows in the Hopper prefill kernel's order, bit for bit, for the
// rows a decode step brings (one query token per sequence, or a few).
//
// The prefill kernel computes a row as a chain of fixed steps: 128-key tiles
// from key 0 upwards; per tile the scores S = Q Kᵀ as tensor-core k16 steps
// over the head dim, the online softmax of online_softmax.cuh (in the
// per-thread layout of the mma.m16n8k16 accumulator), P rounded to bf16,
// O *= the tile's correction, then O += P V as k16 steps over the tile's
// keys; at the end O / l rounded to bf16. mma.sync m16n8k16 gives the same
// bits as wgmma for the same k16 chain (dev/cuda/order_lab.cu), and one warp
// of m16n8k16 holds exactly one warp's share of the wgmma accumulator, so a
// warp running these steps on 16 rows reproduces the prefill kernel's rows.
// Rows are independent, so a warp packs the query heads of one KV group (and
// the tokens of a short query) into its 16 rows, and each KV head's keys are
// read once per warp.
//
// A warp streams its tiles' K and V in 32-key chunks through a ring in
// shared memory (cp.async through the block table), keeps S, P and O in
// registers, and runs all of a row's tiles itself: no split of the keys, since
// the prefill kernel has none. One warp per CTA, so that many CTAs share an SM.
#include <cuda_bf16.h>

#include <cmath>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/mma_primitives.cuh"
#include "kernels/cuda/online_softmax.cuh"

namespace exactly::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kBN = 128;        // keys per tile: the prefill kernel's (flash_prefill.cu, kSm90BN)
constexpr int kChunkKeys = 32;  // keys per copy into shared memory
constexpr int kChunksPerTile = kBN / kChunkKeys;
constexpr int kRing = 6;        // chunks in flight per warp

struct ExactRowsParams {
  const bf16* q;  // [tokens, n_heads, D]
  bf16* out;      // [tokens, n_heads, D]
  const bf16* k;  // [slots, n_kv_heads, D]
  const bf16* v;  // [slots, n_kv_heads, D]
  const int32_t* query_start;   // [n_seqs + 1]
  const int32_t* seq_lens;      // [n_seqs]
  const int32_t* block_tables;  // [n_seqs, max_blocks_per_seq]
  int max_blocks_per_seq, block_size, n_kv_heads, n_heads, group;
  float scale_log2;
};

// One 32-key chunk of K or V rows (D 16-bit columns each) in shared memory,
// 16-byte pieces XOR-swizzled by the row's low three bits.
template <int D>
__device__ __forceinline__ uint32_t chunk_offset(int key, int piece) {
  return swizzled(key, piece, D * 2);
}

// Copies 32 keys' rows of K or V from key0 on into a ring slot, through the
// block table. Keys at or past ctx_len are zero-filled, never read.
template <int D>
__device__ __forceinline__ void copy_chunk(uint32_t slot_addr, const bf16* pool, const int32_t* table, int block_size,
                                           int n_kv_heads, int kv_head, int key0, int ctx_len, int lane) {
  constexpr int kPieces = D / 8;  // 16-byte pieces per row
#pragma unroll
  for (int i = lane; i < kChunkKeys * kPieces; i += 32) {
    const int row = i / kPieces, piece = i % kPieces, key = key0 + row;
    const bool valid = key < ctx_len;
    const int64_t slot = valid ? int64_t{table[key / block_size]} * block_size + key % block_size : 0;
    const bf16* src = pool + (slot * n_kv_heads + kv_head) * D + piece * 8;
    cp_async_16(slot_addr + chunk_offset<D>(row, piece), src, valid);
  }
}

template <int D>
__global__ void __launch_bounds__(32) exact_rows_kernel(const ExactRowsParams p) {
  constexpr int kChunkBytes = kChunkKeys * D * 2;
  __shared__ __align__(128) uint8_t ring[kRing * kChunkBytes];
  const int s = blockIdx.x, kv_head = blockIdx.y, lane = threadIdx.x;
  const int g = lane / 4, c = lane % 4;
  const int q0 = p.query_start[s], q_len = p.query_start[s + 1] - q0, ctx_len = p.seq_lens[s];
  const int rows = q_len * p.group, row0 = blockIdx.z * 16;
  if (row0 >= rows) return;
  const int32_t* table = p.block_tables + int64_t{s} * p.max_blocks_per_seq;

  // Row r of the warp: token (row0 + r) / group of the query, head
  // kv_head * group + (row0 + r) % group; rows past `rows` are zeros.
  auto row_q = [&](int r) -> const bf16* {
    const int packed = row0 + r;
    if (packed >= rows) return nullptr;
    return p.q + (int64_t{q0 + packed / p.group} * p.n_heads + kv_head * p.group + packed % p.group) * D;
  };
  // Q as mma A fragments, one per 16 columns of the head dim.
  uint32_t qf[D / 16][4];
  {
    const bf16* lo = row_q(g);
    const bf16* hi = row_q(g + 8);
    auto pair = [](const bf16* row, int col) -> uint32_t {
      return row == nullptr ? 0u : *reinterpret_cast<const uint32_t*>(row + col);
    };
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      qf[ks][0] = pair(lo, 16 * ks + 2 * c);
      qf[ks][1] = pair(hi, 16 * ks + 2 * c);
      qf[ks][2] = pair(lo, 16 * ks + 8 + 2 * c);
      qf[ks][3] = pair(hi, 16 * ks + 8 + 2 * c);
    }
  }
  // The positions of the thread's two rows (masking), as the prefill kernel
  // places token j of a query of q_len tokens: ctx_len - q_len + j.
  const int pos_lo = ctx_len - q_len + (row0 + g) / p.group;
  const int pos_hi = ctx_len - q_len + (row0 + g + 8) / p.group;

  // The chunk sequence: per tile, its K chunks, then its V chunks.
  const int n_tiles = (ctx_len + kBN - 1) / kBN;
  const int n_chunks = n_tiles * 2 * kChunksPerTile;
  const uint32_t ring_addr = smem_address(ring);
  auto issue = [&](int i) {
    if (i < n_chunks) {
      const int tile = i / (2 * kChunksPerTile), j = i % (2 * kChunksPerTile);
      const bool is_v = j >= kChunksPerTile;
      copy_chunk<D>(ring_addr + (i % kRing) * kChunkBytes, is_v ? p.v : p.k, table, p.block_size, p.n_kv_heads,
                    kv_head, tile * kBN + (j % kChunksPerTile) * kChunkKeys, ctx_len, lane);
    }
    cp_async_commit();  // an empty group past the end keeps the wait counts uniform
  };
  for (int i = 0; i < kRing - 1; ++i) issue(i);

  OnlineSoftmax<kBN> sm;
  float o[D / 2];
#pragma unroll
  for (int i = 0; i < D / 2; ++i) o[i] = 0.f;
  float sc[kBN / 2];
  uint32_t pk[kBN / 16][4];
  const int q_addr_row = lane % 8, q_mat = lane / 8;  // ldmatrix: the lane's row and matrix

  int next = kRing - 1;
  for (int tile = 0; tile < n_tiles; ++tile) {
    // S = Q Kᵀ, 32 keys (four 8-key n-tiles) per chunk, k16 steps over D.
#pragma unroll
    for (int ch = 0; ch < kChunksPerTile; ++ch) {
      cp_async_wait<kRing - 2>();
      __syncwarp();
      const uint32_t chunk = ring_addr + ((tile * 2 * kChunksPerTile + ch) % kRing) * kChunkBytes;
#pragma unroll
      for (int nt = 0; nt < kChunkKeys / 8; ++nt) {
        float acc[4] = {0.f, 0.f, 0.f, 0.f};
#pragma unroll
        for (int ks = 0; ks < D / 16; ks += 2) {
          // b for two k16 steps: matrices (keys 8nt.., columns 16ks + 8m..).
          uint32_t b[4];
          ldmatrix_x4(b, chunk + chunk_offset<D>(nt * 8 + q_addr_row, 2 * ks + q_mat));
          Elem<bf16>::mma(acc, qf[ks], b[0], b[1]);
          Elem<bf16>::mma(acc, qf[ks + 1], b[2], b[3]);
        }
        const int j = ch * (kChunkKeys / 8) + nt;
#pragma unroll
        for (int e = 0; e < 4; ++e) sc[4 * j + e] = acc[e];
      }
      __syncwarp();
      issue(next++);
    }
    // The prefill kernel's softmax of this tile (masking only the last one,
    // as it does: masking an unmasked tile changes nothing).
    const int key0 = tile * kBN;
#pragma unroll
    for (int i = 0; i < kBN / 2; ++i) {
      const int key = key0 + (i / 4) * 8 + c * 2 + (i & 1);
      const int pos = (i % 4) < 2 ? pos_lo : pos_hi;
      if (key >= ctx_len || key > pos) sc[i] = -INFINITY;
    }
    sm.update(sc, p.scale_log2);
#pragma unroll
    for (int ks = 0; ks < kBN / 16; ++ks) {
      pk[ks][0] = Elem<bf16>::pack(sc[8 * ks + 0], sc[8 * ks + 1]);
      pk[ks][1] = Elem<bf16>::pack(sc[8 * ks + 2], sc[8 * ks + 3]);
      pk[ks][2] = Elem<bf16>::pack(sc[8 * ks + 4], sc[8 * ks + 5]);
      pk[ks][3] = Elem<bf16>::pack(sc[8 * ks + 6], sc[8 * ks + 7]);
    }
    sm.rescale(o);
    // O += P V, 32 keys (two k16 steps) per chunk, every 8 columns of D.
#pragma unroll
    for (int ch = 0; ch < kChunksPerTile; ++ch) {
      cp_async_wait<kRing - 2>();
      __syncwarp();
      const uint32_t chunk =
          ring_addr + ((tile * 2 * kChunksPerTile + kChunksPerTile + ch) % kRing) * kChunkBytes;
#pragma unroll
      for (int dt = 0; dt < D / 8; dt += 2) {
#pragma unroll
        for (int kk = 0; kk < 2; ++kk) {
          // b for two 8-column n-tiles of one k16 step: matrices (keys
          // 16kk + 8(m % 2).., columns 8(dt + m / 2)..), transposed.
          uint32_t b[4];
          ldmatrix_x4_trans(b, chunk + chunk_offset<D>(16 * kk + (q_mat % 2) * 8 + q_addr_row, dt + q_mat / 2));
          float o0[4] = {o[4 * dt], o[4 * dt + 1], o[4 * dt + 2], o[4 * dt + 3]};
          float o1[4] = {o[4 * dt + 4], o[4 * dt + 5], o[4 * dt + 6], o[4 * dt + 7]};
          Elem<bf16>::mma(o0, pk[2 * ch + kk], b[0], b[1]);
          Elem<bf16>::mma(o1, pk[2 * ch + kk], b[2], b[3]);
#pragma unroll
          for (int e = 0; e < 4; ++e) o[4 * dt + e] = o0[e], o[4 * dt + 4 + e] = o1[e];
        }
      }
      __syncwarp();
      issue(next++);
    }
  }
  cp_async_wait<0>();

  // O / l in bf16, the prefill kernel's rounding.
  float inv[2];
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const float l = sm.row_sum(r);
    inv[r] = l > 0.f ? 1.f / l : 0.f;
  }
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    const int packed = row0 + g + 8 * r;
    if (packed >= rows) continue;
    bf16* dst = p.out + (int64_t{q0 + packed / p.group} * p.n_heads + kv_head * p.group + packed % p.group) * D;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<uint32_t*>(dst + 8 * dt + 2 * c) =
          Elem<bf16>::pack(o[4 * dt + 2 * r] * inv[r], o[4 * dt + 2 * r + 1] * inv[r]);
  }
}

template <int D>
void launch(const PagedKVDevice& c, const AttentionBatchDevice& b, const void* q, int n_heads, float scale, void* out,
            cudaStream_t stream) {
  const ExactRowsParams p{static_cast<const bf16*>(q),
                          static_cast<bf16*>(out),
                          static_cast<const bf16*>(c.k),
                          static_cast<const bf16*>(c.v),
                          b.query_start,
                          b.seq_lens,
                          b.block_tables,
                          b.max_blocks_per_seq,
                          c.block_size,
                          c.n_kv_heads,
                          n_heads,
                          n_heads / c.n_kv_heads,
                          scale * 1.4426950408889634f};
  const int group_rows = b.max_query_len * p.group;
  const dim3 grid(static_cast<unsigned>(b.n_seqs), static_cast<unsigned>(c.n_kv_heads),
                  static_cast<unsigned>((group_rows + 15) / 16));
  exact_rows_kernel<D><<<grid, 32, 0, stream>>>(p);
  check_launch("exact_rows_attention");
}

}  // namespace

void exact_rows_attention(const PagedKVDevice& cache, const AttentionBatchDevice& batch, const void* q, int n_heads,
                          float scale, void* out, cudaStream_t stream) {
  check_attention_args(cache, batch, q, out, n_heads, "exact_rows_attention");
  EXACTLY_CUDA_REQUIRE(cache.dtype == DType::bf16, "exact_rows_attention: bf16 caches only");
  EXACTLY_CUDA_REQUIRE(batch.max_query_len >= 0 && int64_t{batch.max_query_len} * (n_heads / cache.n_kv_heads) <=
                                                       int64_t{16} * 65535,
                       "exact_rows_attention: %d query tokens of %d heads per KV head", batch.max_query_len,
                       n_heads / cache.n_kv_heads);
  if (batch.n_seqs == 0 || batch.max_query_len <= 0) return;
  if (cache.head_dim == 64) return launch<64>(cache, batch, q, n_heads, scale, out, stream);
  launch<128>(cache, batch, q, n_heads, scale, out, stream);
}

}  // namespace exactly::kernels::cuda
