// Split-KV paged decode (flash-decoding) on tensor cores. One CTA takes one
// partition of kPart keys (0: p.part_len, or with that 0 too the
// decode_partition of the sequence's length) of one sequence for one KV head and all the
// query heads that share it (GQA: up to 16 heads as the 16 rows of the mma
// tile, so each key is read once for the whole group). Its warps take the
// partition's 16-key chunks in turn, each with its own cp.async ring of
// kStages chunks and its own online softmax; the warps' states are merged in
// shared memory. A sequence with several partitions leaves one normalised
// partial row and its log-sum-exp per partition, merged by a second kernel.
// Every split is fixed by kPart alone, so a row's bits never depend on the
// batch it was computed in.
#pragma once

#include <cstdint>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/attention_params.h"
#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/mma_primitives.cuh"

namespace exactly::kernels::cuda {

// Row query_start[s] of q holds sequence s's token.
struct DecodeParams : PagedAttentionParams<void> {
  int32_t row_groups;  // ceil(group / 16)
  int32_t max_parts;   // partitions per sequence in the workspace
  float* partial_out;  // [n_seqs, n_heads, max_parts, D]
  float* partial_lse;  // [n_seqs, n_heads, max_parts], log2 domain
  int32_t part_len;    // keys per partition; 0: decode_partition of each sequence's length
};

// Keys per partition of a sequence of ctx_len keys: kPart when the kernel
// fixes it, else the launch's p.part_len, else the sequence's own
// decode_partition. The decode and merge kernels must agree on it.
template <int kPart>
__device__ __forceinline__ int partition_keys(const DecodeParams& p, int ctx_len) {
  return kPart > 0 ? kPart : p.part_len > 0 ? p.part_len : decode_partition(ctx_len);
}

template <int D, int WARPS, int STAGES>
struct DecodeShape {
  static constexpr int kThreads = 32 * WARPS;
  static constexpr int kRowBytes = D * 2;
  static constexpr int kChunks = D / 8;
  static constexpr int kChunkBytes = 16 * kRowBytes;              // 16 keys of K (or V)
  static constexpr int kRingBytes = STAGES * 2 * kChunkBytes;     // per warp, K and V
  static constexpr int kQBytes = 16 * kRowBytes;
  static constexpr int kMergeBytes = 16 * D * 4 + 2 * 16 * 4;     // per warp: o rows, m, l
  static_assert(kMergeBytes <= kRingBytes, "the merge reuses each warp's ring");
  static constexpr int kSmemBytes = kQBytes + WARPS * kRingBytes;
};

// kQInRegs keeps the query fragments in registers for the whole partition;
// without it they are re-read from shared memory per chunk, which frees
// registers for more resident CTAs (kMinBlocks per SM), so that one CTA's
// start and merge overlap the others' streaming.
template <typename T, int D, int WARPS, int STAGES, int kPart, bool kQInRegs = true, int kMinBlocks = 1>
__global__ void __launch_bounds__(32 * WARPS, kMinBlocks) paged_decode_kernel(const DecodeParams p) {
  using S = DecodeShape<D, WARPS, STAGES>;
  extern __shared__ __align__(128) unsigned char smem[];
  wait_for_predecessor();  // dependent_launch.h: nothing is read before the wait
  release_dependents();

  const int part = blockIdx.x;
  const int kv_head = blockIdx.y / p.row_groups;
  const int row_group = blockIdx.y % p.row_groups;
  const int seq = blockIdx.z;
  const int ctx_len = p.seq_lens[seq];
  const int part_len = partition_keys<kPart>(p, ctx_len);
  const int part_begin = part * part_len;
  if (part_begin >= ctx_len) return;
  const int part_end = min(ctx_len, part_begin + part_len);
  const int n_parts = (ctx_len + part_len - 1) / part_len;
  const int head0 = kv_head * p.group + row_group * 16;
  const int rows = min(16, p.group - row_group * 16);
  const int token = p.query_start[seq];

  const int tid = threadIdx.x;
  const int warp = tid / 32;
  const int lane = tid % 32;
  const T* q = static_cast<const T*>(p.q);
  const T* kc = static_cast<const T*>(p.k_cache);
  const T* vc = static_cast<const T*>(p.v_cache);
  const int32_t* table = p.block_tables + int64_t{seq} * p.max_blocks_per_seq;

  unsigned char* ring_bytes = smem + S::kQBytes + warp * S::kRingBytes;
  const uint32_t q_smem = smem_address(smem);
  const uint32_t ring = smem_address(ring_bytes);

  for (int i = tid; i < 16 * S::kChunks; i += S::kThreads) {
    const int row = i / S::kChunks, chunk = i % S::kChunks;
    const bool valid = row < rows;
    const T* src = q + (int64_t{token} * p.n_heads + head0 + (valid ? row : 0)) * D + chunk * 8;
    cp_async_16(q_smem + swizzled(row, chunk, S::kRowBytes), src, valid);
  }
  cp_async_commit();

  const int n_chunks = (part_end - part_begin + 15) / 16;
  const int my_chunks = warp < n_chunks ? (n_chunks - warp + WARPS - 1) / WARPS : 0;

  // Chunk i of this warp covers keys part_begin + (warp + i * WARPS) * 16 + [0, 16);
  // 16 | block_size, so the 16 keys are consecutive slots of one block.
  auto load_chunk = [&](int i, int stage) {
    const int key0 = part_begin + (warp + i * WARPS) * 16;
    const int64_t slot0 = int64_t{table[key0 / p.block_size]} * p.block_size + key0 % p.block_size;
    const uint32_t k_dst = ring + stage * 2 * S::kChunkBytes;
    const uint32_t v_dst = k_dst + S::kChunkBytes;
#pragma unroll
    for (int j = 0; j < 16 * S::kChunks / 32; ++j) {
      const int idx = lane + 32 * j;
      const int row = idx / S::kChunks, chunk = idx % S::kChunks;
      const bool valid = key0 + row < part_end;
      const int64_t offset = ((slot0 + row) * p.n_kv_heads + kv_head) * D + chunk * 8;
      cp_async_16(k_dst + swizzled(row, chunk, S::kRowBytes), kc + (valid ? offset : 0), valid);
      cp_async_16(v_dst + swizzled(row, chunk, S::kRowBytes), vc + (valid ? offset : 0), valid);
    }
  };
#pragma unroll
  for (int st = 0; st < STAGES - 1; ++st) {
    if (st < my_chunks) load_chunk(st, st);
    cp_async_commit();
  }

  cp_async_wait<STAGES - 1>();  // the query rows (the oldest group)
  __syncthreads();
  uint32_t q_regs[kQInRegs ? D / 16 : 1][4];
  if constexpr (kQInRegs) {
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks)
      ldmatrix_x4(q_regs[ks], q_smem + swizzled(lane % 16, ks * 2 + lane / 16, S::kRowBytes));
  }

  float o[D / 8][4];
#pragma unroll
  for (int dt = 0; dt < D / 8; ++dt) o[dt][0] = o[dt][1] = o[dt][2] = o[dt][3] = 0.f;
  float m_run[2] = {-INFINITY, -INFINITY};
  float l_run[2] = {0.f, 0.f};

  for (int i = 0; i < my_chunks; ++i) {
    if (i + STAGES - 1 < my_chunks) load_chunk(i + STAGES - 1, (i + STAGES - 1) % STAGES);
    cp_async_commit();
    cp_async_wait<STAGES - 1>();
    __syncwarp();
    const uint32_t k_tile = ring + (i % STAGES) * 2 * S::kChunkBytes;
    const uint32_t v_tile = k_tile + S::kChunkBytes;

    float s[2][4] = {{0.f, 0.f, 0.f, 0.f}, {0.f, 0.f, 0.f, 0.f}};
#pragma unroll
    for (int ks = 0; ks < D / 16; ++ks) {
      uint32_t qf[4];
      if constexpr (kQInRegs) {
        qf[0] = q_regs[ks][0], qf[1] = q_regs[ks][1], qf[2] = q_regs[ks][2], qf[3] = q_regs[ks][3];
      } else {
        ldmatrix_x4(qf, q_smem + swizzled(lane % 16, ks * 2 + lane / 16, S::kRowBytes));
      }
      uint32_t kb[4];
      ldmatrix_x4(kb, k_tile + swizzled((lane / 16) * 8 + lane % 8, ks * 2 + (lane / 8) % 2, S::kRowBytes));
      Elem<T>::mma(s[0], qf, kb[0], kb[1]);
      Elem<T>::mma(s[1], qf, kb[2], kb[3]);
    }
    const int key0 = part_begin + (warp + i * WARPS) * 16;
#pragma unroll
    for (int nt = 0; nt < 2; ++nt)
#pragma unroll
      for (int e = 0; e < 4; ++e) {
        const int key = key0 + nt * 8 + (lane % 4) * 2 + (e & 1);
        s[nt][e] = key < part_end ? s[nt][e] * p.scale_log2 : -INFINITY;
      }
#pragma unroll
    for (int r = 0; r < 2; ++r) {
      float mx = fmaxf(m_run[r], fmaxf(fmaxf(s[0][2 * r], s[0][2 * r + 1]), fmaxf(s[1][2 * r], s[1][2 * r + 1])));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 1));
      mx = fmaxf(mx, __shfl_xor_sync(0xffffffffu, mx, 2));
      // Every chunk holds at least one key below part_end, so mx is finite.
      const float correction = exp2f(m_run[r] - mx);
      m_run[r] = mx;
      float sum = 0.f;
#pragma unroll
      for (int nt = 0; nt < 2; ++nt) {
        s[nt][2 * r] = exp2f(s[nt][2 * r] - mx);
        s[nt][2 * r + 1] = exp2f(s[nt][2 * r + 1] - mx);
        sum += s[nt][2 * r] + s[nt][2 * r + 1];
      }
      l_run[r] = l_run[r] * correction + sum;
#pragma unroll
      for (int dt = 0; dt < D / 8; ++dt) {
        o[dt][2 * r] *= correction;
        o[dt][2 * r + 1] *= correction;
      }
    }
    const uint32_t pa[4] = {Elem<T>::pack(s[0][0], s[0][1]), Elem<T>::pack(s[0][2], s[0][3]),
                            Elem<T>::pack(s[1][0], s[1][1]), Elem<T>::pack(s[1][2], s[1][3])};
#pragma unroll
    for (int dt = 0; dt < D / 8; dt += 2) {
      uint32_t vb[4];
      ldmatrix_x4_trans(vb, v_tile + swizzled(lane % 8 + ((lane / 8) % 2) * 8, dt + lane / 16, S::kRowBytes));
      Elem<T>::mma(o[dt], pa, vb[0], vb[1]);
      Elem<T>::mma(o[dt + 1], pa, vb[2], vb[3]);
    }
    __syncwarp();  // the whole warp is done with this stage before it is refilled
  }
  cp_async_wait<0>();
  __syncwarp();

  // Each warp parks its state in its own ring: o as 16 x D floats, then m, l.
  float* park = reinterpret_cast<float*>(ring_bytes);
#pragma unroll
  for (int r = 0; r < 2; ++r) {
    float l = l_run[r];
    l += __shfl_xor_sync(0xffffffffu, l, 1);
    l += __shfl_xor_sync(0xffffffffu, l, 2);
    const int row = lane / 4 + 8 * r;
#pragma unroll
    for (int dt = 0; dt < D / 8; ++dt)
      *reinterpret_cast<float2*>(park + row * D + dt * 8 + (lane % 4) * 2) = make_float2(o[dt][2 * r], o[dt][2 * r + 1]);
    if (lane % 4 == 0) {
      park[16 * D + row] = m_run[r];
      park[16 * D + 16 + row] = l;
    }
  }
  __syncthreads();

  T* out = static_cast<T*>(p.out);
  for (int idx = tid; idx < rows * D; idx += S::kThreads) {
    const int row = idx / D, d = idx % D;
    float m = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const float* pw = reinterpret_cast<const float*>(smem + S::kQBytes + w * S::kRingBytes);
      m = fmaxf(m, pw[16 * D + row]);
    }
    float l = 0.f, acc = 0.f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const float* pw = reinterpret_cast<const float*>(smem + S::kQBytes + w * S::kRingBytes);
      const float weight = exp2f(pw[16 * D + row] - m);  // 0 for a warp that saw no key
      l += pw[16 * D + 16 + row] * weight;
      acc += pw[row * D + d] * weight;
    }
    const int head = head0 + row;
    if (n_parts == 1) {
      out[(int64_t{token} * p.n_heads + head) * D + d] = Elem<T>::from_float(acc / l);
    } else {
      const int64_t at = (int64_t{seq} * p.n_heads + head) * p.max_parts + part;
      p.partial_out[at * D + d] = acc / l;
      if (d == 0) p.partial_lse[at] = m + log2f(l);
    }
  }
}

// A row with at least this many partitions is merged by several groups of
// threads (merge_partitions_kernel); the launcher takes the grouped kernel
// for a batch that may hold such a row.
constexpr int kGroupedMergeParts = 64;

// Merges the partitions of each (sequence, head) row by the log-sum-exp rule.
// D threads per group, one per element of the head dimension. A row of at
// least kGroupedMergeParts partitions is shared by the GROUPS groups: group g
// first merges partitions g, g + GROUPS, ..., then group 0 merges the groups'
// results in group order; a shorter row is merged by group 0 alone, in
// partition order. Which order a row takes depends on its own partition
// count only, never on the batch's longest row. One group walking a long
// context's partitions in turn waited on each one's loads: at 1 x 128k (256
// partitions) the merge took a fifth of the step.
template <typename T, int D, int kPart, int GROUPS = 1>
__global__ void __launch_bounds__(D * GROUPS) merge_partitions_kernel(const DecodeParams p) {
  wait_for_predecessor();
  release_dependents();
  const int head = blockIdx.x;
  const int seq = blockIdx.y;
  const int ctx_len = p.seq_lens[seq];
  const int part_len = partition_keys<kPart>(p, ctx_len);
  const int n_parts = (ctx_len + part_len - 1) / part_len;
  if (n_parts <= 1) return;  // written directly by the decode kernel
  const int groups = n_parts >= kGroupedMergeParts ? GROUPS : 1;  // the same for the whole block
  const int d = threadIdx.x % D, g = threadIdx.x / D;
  if (groups == 1 && g != 0) return;
  const int64_t base = (int64_t{seq} * p.n_heads + head) * p.max_parts;
  float m = -INFINITY;
  for (int i = g; i < n_parts; i += groups) m = fmaxf(m, p.partial_lse[base + i]);
  float l = 0.f, acc = 0.f;
  for (int i = g; i < n_parts; i += groups) {
    const float weight = exp2f(p.partial_lse[base + i] - m);
    l += weight;
    acc += p.partial_out[(base + i) * D + d] * weight;
  }
  if constexpr (GROUPS > 1) {
    if (groups > 1) {
      __shared__ float group_m[GROUPS], group_l[GROUPS], group_acc[GROUPS][D];
      if (d == 0) {
        group_m[g] = m;
        group_l[g] = l;
      }
      group_acc[g][d] = acc;
      __syncthreads();
      if (g != 0) return;
      m = -INFINITY;
#pragma unroll
      for (int j = 0; j < GROUPS; ++j) m = fmaxf(m, group_m[j]);
      l = 0.f, acc = 0.f;
#pragma unroll
      for (int j = 0; j < GROUPS; ++j) {
        const float weight = exp2f(group_m[j] - m);
        l += group_l[j] * weight;
        acc += group_acc[j][d] * weight;
      }
    }
  }
  T* out = static_cast<T*>(p.out);
  out[(int64_t{p.query_start[seq]} * p.n_heads + head) * D + d] = Elem<T>::from_float(acc / l);
}

}  // namespace exactly::kernels::cuda
