// Element-wise and row-wise layer operations (see layer_ops.h). Their work is
// small, but at batch 1 each one's latency sits between two products: spread
// over enough threads that no thread walks a chain of dependent loads (they
// were a quarter of a batch-1 step before: docs/journal/benchmarks-record.md
// §6).
#include <cuda_bf16.h>

#include <algorithm>

#include "kernels/cuda/dependent_launch.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/layer_ops.h"

namespace exactly::kernels::cuda {
namespace {

using bf16 = __nv_bfloat16;

constexpr int kRowThreads = 256;

__global__ void embedding_kernel(const bf16* table, const int32_t* tokens, int dim, int vocab, float scale,
                                 float* x) {
  wait_for_predecessor();
  release_dependents();
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  const bool valid = id >= 0 && id < vocab;
  for (int i = threadIdx.x; i < dim; i += blockDim.x)
    x[t * dim + i] = valid ? __fmul_rn(__bfloat162float(table[int64_t{id} * dim + i]), scale) : 0.0f;
}

// out[t] = [table[tokens[t]] | side[t]], bf16 rows of 2 dim: a draft head's
// input, its token's embedding beside the target's hidden state.
__global__ void embed_beside_kernel(const bf16* table, const int32_t* tokens, const bf16* side, int dim, int vocab,
                                    bf16* out) {
  wait_for_predecessor();
  release_dependents();
  const int64_t t = blockIdx.x;
  const int32_t id = tokens[t];
  const bool valid = id >= 0 && id < vocab;
  bf16* row = out + t * 2 * dim;
  for (int i = threadIdx.x; i < dim; i += blockDim.x) {
    row[i] = valid ? table[int64_t{id} * dim + i] : __float2bfloat16(0.0f);
    row[dim + i] = side[t * dim + i];
  }
}

// Sum over the block in a fixed order: each thread's strided partial, then a
// shuffle tree within each warp, then warp 0 over the warps' sums.
__device__ float block_sum(float v) {
  __shared__ float warp_sums[kRowThreads / 32];
  for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) warp_sums[warp] = v;
  __syncthreads();
  if (warp == 0) {
    v = lane < kRowThreads / 32 ? warp_sums[lane] : 0.0f;
    for (int offset = 16; offset > 0; offset >>= 1) v += __shfl_xor_sync(0xffffffffu, v, offset);
    if (lane == 0) warp_sums[0] = v;
  }
  __syncthreads();
  const float total = warp_sums[0];
  __syncthreads();  // warp_sums may be reused by the caller's next reduction
  return total;
}

// A row of up to kNormVectors x 4 x kRowThreads values is held in registers
// between the sum of squares and the scaling, read with 16-byte loads all in
// flight at once: at batch 1 the norm is pure latency (4 us a call with a
// strided scalar loop). Wider rows, or buffers not 16-byte aligned, take the
// scalar loop; which path a row takes depends on dim and the buffers alone,
// never on the batch.
constexpr int kNormVectors = 8;

// kAddF32: out is the fp32 stream [n, dim] and takes the normed row added
// (each product and the sum rounded on its own); else out is bf16 [n, dim].
template <bool kAddF32>
__global__ void __launch_bounds__(kRowThreads) rmsnorm_kernel(const float* x, const float* weight, const int32_t* rows,
                                                               int dim, float eps, bool vectorised, void* out_rows) {
  wait_for_predecessor();
  release_dependents();
  const int64_t i = blockIdx.x;
  const int64_t r = rows != nullptr ? rows[i] : i;
  const float* xr = x + r * dim;
  if (vectorised) {
    const int vectors = dim / 4;
    const auto* xv = reinterpret_cast<const float4*>(xr);
    float4 v[kNormVectors];
    float ss = 0.0f;
#pragma unroll
    for (int u = 0; u < kNormVectors; ++u) {
      const int j = threadIdx.x + u * kRowThreads;
      v[u] = j < vectors ? xv[j] : make_float4(0.0f, 0.0f, 0.0f, 0.0f);
    }
#pragma unroll
    for (int u = 0; u < kNormVectors; ++u) {
      ss = fmaf(v[u].x, v[u].x, ss);
      ss = fmaf(v[u].y, v[u].y, ss);
      ss = fmaf(v[u].z, v[u].z, ss);
      ss = fmaf(v[u].w, v[u].w, ss);
    }
    const float inv = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
    const auto* wv = reinterpret_cast<const float4*>(weight);
#pragma unroll
    for (int u = 0; u < kNormVectors; ++u) {
      const int j = threadIdx.x + u * kRowThreads;
      if (j >= vectors) break;
      const float4 g = wv[j];
      if constexpr (kAddF32) {
        float4* o = reinterpret_cast<float4*>(static_cast<float*>(out_rows) + i * dim) + j;
        float4 acc = *o;
        acc.x = __fadd_rn(acc.x, __fmul_rn(__fmul_rn(v[u].x, inv), g.x));
        acc.y = __fadd_rn(acc.y, __fmul_rn(__fmul_rn(v[u].y, inv), g.y));
        acc.z = __fadd_rn(acc.z, __fmul_rn(__fmul_rn(v[u].z, inv), g.z));
        acc.w = __fadd_rn(acc.w, __fmul_rn(__fmul_rn(v[u].w, inv), g.w));
        *o = acc;
      } else {
        auto* o = reinterpret_cast<__nv_bfloat162*>(static_cast<bf16*>(out_rows) + i * dim);
        o[2 * j] = __floats2bfloat162_rn(v[u].x * inv * g.x, v[u].y * inv * g.y);
        o[2 * j + 1] = __floats2bfloat162_rn(v[u].z * inv * g.z, v[u].w * inv * g.w);
      }
    }
    return;
  }
  float ss = 0.0f;
  for (int j = threadIdx.x; j < dim; j += kRowThreads) ss += xr[j] * xr[j];
  const float inv = rsqrtf(block_sum(ss) / static_cast<float>(dim) + eps);
  for (int j = threadIdx.x; j < dim; j += kRowThreads) {
    if constexpr (kAddF32) {
      float* o = static_cast<float*>(out_rows) + i * dim + j;
      *o = __fadd_rn(*o, __fmul_rn(__fmul_rn(xr[j], inv), weight[j]));
    } else {
      static_cast<bf16*>(out_rows)[i * dim + j] = __float2bfloat16(xr[j] * inv * weight[j]);
    }
  }
}

// The angle of pair i at position pos: float64 like the CPU kernel, cosine and
// sine then rounded to fp32. One function for both paths below, so that a
// table of angles holds the very values the rope kernel would compute.
__device__ __forceinline__ float2 rope_angle(int32_t pos, int i, int rope_dims, float freq_base) {
  const double freq = pow(static_cast<double>(freq_base), -2.0 * i / rope_dims);
  double s, c;
  sincos(static_cast<double>(pos) * freq, &s, &c);
  return make_float2(static_cast<float>(c), static_cast<float>(s));
}

// With a scaling: pair i's frequency over divisors[i] (float64), each
// rounded cosine and sine times `magnitude` (fp32), as the CPU computes them.
__device__ __forceinline__ float2 scaled_rope_angle(int32_t pos, int i, int rope_dims, float freq_base,
                                                    float divisor, float magnitude) {
  const double freq = pow(static_cast<double>(freq_base), -2.0 * i / rope_dims) / static_cast<double>(divisor);
  double s, c;
  sincos(static_cast<double>(pos) * freq, &s, &c);
  return make_float2(__fmul_rn(static_cast<float>(c), magnitude), __fmul_rn(static_cast<float>(s), magnitude));
}

__global__ void rope_angles_kernel(const int32_t* positions, int64_t n_tokens, int rope_dims, float freq_base,
                                   const float* divisors, float magnitude, float2* out) {
  wait_for_predecessor();
  release_dependents();
  const int half = rope_dims / 2;
  for (int64_t t = blockIdx.y; t < n_tokens; t += gridDim.y)
    for (int i = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); i < half; i += gridDim.x * blockDim.x)
      out[t * half + i] = divisors == nullptr && magnitude == 1.0f
                              ? rope_angle(positions[t], i, rope_dims, freq_base)
                              : scaled_rope_angle(positions[t], i, rope_dims, freq_base,
                                                  divisors == nullptr ? 1.0f : divisors[i], magnitude);
}

// (x0, x1) rotated by the angle whose cosine and sine are cs, each product
// and difference rounded on its own (no contraction into FMAs), so that both
// rope kernels below give the same bits.
__device__ __forceinline__ void rotate_pair(float& x0, float& x1, float2 cs) {
  const float r0 = __fsub_rn(__fmul_rn(x0, cs.x), __fmul_rn(x1, cs.y));
  const float r1 = __fadd_rn(__fmul_rn(x0, cs.y), __fmul_rn(x1, cs.x));
  x0 = r0, x1 = r1;
}

// One block per (token, group of heads): at batch 1 a single block walking
// all heads was a chain of dependent loads (9 us a layer on the H200).
constexpr int kRopeThreads = 256;
constexpr int kRopeVElements = 4 * kRopeThreads;  // V elements copied per block

__global__ void __launch_bounds__(kRopeThreads) rope_store_kernel(RopeStoreArgs a, PagedKVDevice cache,
                                                                   int qk_blocks) {
  wait_for_predecessor();
  release_dependents();
  const int64_t t = blockIdx.x;
  const int hd = cache.head_dim, n_kv = cache.n_kv_heads;
  const int row = (a.n_heads + 2 * n_kv) * hd;
  const bf16* in = static_cast<const bf16*>(a.qkv) + t * row;
  const int64_t slot = a.slot_mapping[t];
  const int kv_row = n_kv * hd;
  bf16* k_dst = slot >= 0 ? static_cast<bf16*>(cache.k) + slot * kv_row : nullptr;
  bf16* v_dst = slot >= 0 ? static_cast<bf16*>(cache.v) + slot * kv_row : nullptr;
  bf16* q_dst = static_cast<bf16*>(a.q_out) + t * a.n_heads * hd;
  auto load = [&](int e) { return __bfloat162float(in[e]) + (a.bias != nullptr ? a.bias[e] : 0.0f); };

  if (static_cast<int>(blockIdx.y) >= qk_blocks) {  // a slice of V, copied
    if (v_dst == nullptr) return;
    const int v_base = (a.n_heads + n_kv) * hd;
    const int first = (static_cast<int>(blockIdx.y) - qk_blocks) * kRopeVElements;
    const int last = min(kv_row, first + kRopeVElements);
    for (int e = first + threadIdx.x; e < last; e += kRopeThreads)
      v_dst[e] = a.bias != nullptr ? __float2bfloat16(load(v_base + e)) : in[v_base + e];
    return;
  }
  // The angles of this token, from the pass's table (rope_angles) or
  // computed here and shared by the block's heads. In float64 they cost more
  // than the rest of the kernel: once a pass, not once a layer and block.
  __shared__ float2 angle_s[128];
  const int half = hd / 2, rope_half = a.rope_dims / 2;
  const float2* angles = a.angles != nullptr ? static_cast<const float2*>(a.angles) + t * rope_half : angle_s;
  if (a.angles == nullptr) {
    for (int i = threadIdx.x; i < rope_half; i += kRopeThreads)
      angle_s[i] = rope_angle(a.positions[t], i, a.rope_dims, a.freq_base);
    __syncthreads();
  }
  // q and k heads: one work item per pair of elements of a head.
  const int pair_items = (a.n_heads + n_kv) * half;
  const int item = static_cast<int>(blockIdx.y) * kRopeThreads + static_cast<int>(threadIdx.x);
  if (item >= pair_items) return;
  const int head = item / half, i = item % half;
  int e0, e1;
  bool rotate;
  if (a.layout == RopeLayout::kAdjacentPairs) {
    e0 = 2 * i, e1 = 2 * i + 1, rotate = i < rope_half;
  } else if (i < rope_half) {
    e0 = i, e1 = i + rope_half, rotate = true;
  } else {  // dims past rope_dims are not rotated; walk them in pairs
    e0 = a.rope_dims + 2 * (i - rope_half), e1 = e0 + 1, rotate = false;
  }
  const int base = head * hd;
  float x0 = load(base + e0), x1 = load(base + e1);
  if (rotate) rotate_pair(x0, x1, angles[i]);
  bf16* dst = head < a.n_heads ? q_dst + base : k_dst == nullptr ? nullptr : k_dst + (head - a.n_heads) * hd;
  if (dst != nullptr) {
    dst[e0] = __float2bfloat16(x0);
    dst[e1] = __float2bfloat16(x1);
  }
}

// The engine's case (the whole head rotates, the pass's table of angles,
// 16-byte aligned rows): each thread takes 4 pairs of one head, or 8 elements
// of V, in 8- and 16-byte accesses. One pair per thread kept 4 bytes in
// flight per thread and ran at 1.3 TB/s on 8,192 tokens
// (docs/journal/benchmarks-record.md §6).
// Unit u of a token: q and k heads' units (head_dim / 8 a head) then V's.
constexpr int kRopeWideThreads = 128;

__global__ void __launch_bounds__(kRopeWideThreads) rope_store_wide_kernel(RopeStoreArgs a, PagedKVDevice cache) {
  wait_for_predecessor();
  release_dependents();
  const int64_t t = blockIdx.x;
  const int hd = cache.head_dim, n_kv = cache.n_kv_heads, per_head = hd / 8;
  const int qk_units = (a.n_heads + n_kv) * per_head;
  const int u = static_cast<int>(blockIdx.y) * kRopeWideThreads + static_cast<int>(threadIdx.x);
  if (u >= qk_units + n_kv * per_head) return;
  const bf16* in = static_cast<const bf16*>(a.qkv) + t * (a.n_heads + 2 * n_kv) * hd;
  const int64_t slot = a.slot_mapping[t];
  const int head = u / per_head, k = u % per_head;
  const int kv_row = n_kv * hd;
  float x[8];
  auto load = [&](int e, int n, float* dst) {  // n (4 or 8) elements from e on, bias added
    const bf16* src = in + e;
    alignas(16) bf16 v[8];
    if (n == 8) {
      *reinterpret_cast<uint4*>(v) = *reinterpret_cast<const uint4*>(src);
    } else {
      *reinterpret_cast<uint2*>(v) = *reinterpret_cast<const uint2*>(src);
    }
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < n) dst[j] = __bfloat162float(v[j]) + (a.bias != nullptr ? a.bias[e + j] : 0.0f);
  };
  auto pack = [](const float* f, int n, bf16* dst) {
    alignas(16) bf16 v[8];
#pragma unroll
    for (int j = 0; j < 8; ++j)
      if (j < n) v[j] = __float2bfloat16(f[j]);
    if (n == 8) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(v);
    } else {
      *reinterpret_cast<uint2*>(dst) = *reinterpret_cast<const uint2*>(v);
    }
  };
  if (u >= qk_units) {  // 8 elements of V
    if (slot < 0) return;
    const int e = (head - a.n_heads - n_kv) * hd + 8 * k;
    bf16* dst = static_cast<bf16*>(cache.v) + slot * kv_row + e;
    if (a.bias == nullptr) {
      *reinterpret_cast<uint4*>(dst) = *reinterpret_cast<const uint4*>(in + (a.n_heads + n_kv) * hd + e);
    } else {
      load((a.n_heads + n_kv) * hd + e, 8, x);
      pack(x, 8, dst);
    }
    return;
  }
  bf16* dst;
  if (head < a.n_heads) {
    dst = static_cast<bf16*>(a.q_out) + (t * a.n_heads + head) * hd;
  } else {
    if (slot < 0) return;
    dst = static_cast<bf16*>(cache.k) + slot * kv_row + (head - a.n_heads) * hd;
  }
  const float2* angles = static_cast<const float2*>(a.angles) + t * (hd / 2) + 4 * k;  // pairs 4k .. 4k + 3
  const int base = head * hd;
  if (a.layout == RopeLayout::kAdjacentPairs) {  // pairs (2i, 2i + 1): elements 8k .. 8k + 7
    load(base + 8 * k, 8, x);
#pragma unroll
    for (int j = 0; j < 4; ++j) rotate_pair(x[2 * j], x[2 * j + 1], angles[j]);
    pack(x, 8, dst + 8 * k);
  } else {  // pairs (i, i + hd / 2): elements 4k .. 4k + 3 and the same in the second half
    load(base + 4 * k, 4, x);
    load(base + hd / 2 + 4 * k, 4, x + 4);
#pragma unroll
    for (int j = 0; j < 4; ++j) rotate_pair(x[j], x[4 + j], angles[j]);
    pack(x, 4, dst + 4 * k);
    pack(x + 4, 4, dst + hd / 2 + 4 * k);
  }
}

// Each q and k head of a token normalised over its head_dim values (Qwen3's
// q_norm and k_norm), in place in the bf16 qkv rows, after the bias. One warp
// a (token, head), its lanes' strided partial sums then a shuffle tree: the
// order depends on head_dim alone. With a bias, V's heads get it here too so
// that rope_and_store runs without one.
constexpr int kHeadNormWarps = 4;
constexpr int kHeadNormMaxPerLane = 8;  // head_dim <= 256

__global__ void __launch_bounds__(kHeadNormWarps * 32) head_rmsnorm_kernel(HeadNormArgs a) {
  wait_for_predecessor();
  release_dependents();
  const int64_t t = blockIdx.x;
  const int head = static_cast<int>(blockIdx.y) * kHeadNormWarps + static_cast<int>(threadIdx.x / 32);
  const int lane = static_cast<int>(threadIdx.x % 32), hd = a.head_dim;
  const int qk_heads = a.n_heads + a.n_kv_heads;
  if (head >= qk_heads + (a.bias != nullptr ? a.n_kv_heads : 0)) return;
  bf16* row = static_cast<bf16*>(a.qkv) + t * (qk_heads + a.n_kv_heads) * hd + head * hd;
  const float* bias = a.bias != nullptr ? a.bias + head * hd : nullptr;
  float v[kHeadNormMaxPerLane];
  float ss = 0.0f;
#pragma unroll
  for (int u = 0; u < kHeadNormMaxPerLane; ++u) {
    const int e = lane + 32 * u;
    v[u] = e < hd ? __bfloat162float(row[e]) + (bias != nullptr ? bias[e] : 0.0f) : 0.0f;
    ss = fmaf(v[u], v[u], ss);
  }
  if (head >= qk_heads) {  // a V head: the bias only
#pragma unroll
    for (int u = 0; u < kHeadNormMaxPerLane; ++u)
      if (lane + 32 * u < hd) row[lane + 32 * u] = __float2bfloat16(v[u]);
    return;
  }
  for (int offset = 16; offset > 0; offset >>= 1) ss += __shfl_xor_sync(0xffffffffu, ss, offset);
  const float inv = rsqrtf(ss / static_cast<float>(hd) + a.eps);
  const float* w = head < a.n_heads ? a.q_norm : a.k_norm;
#pragma unroll
  for (int u = 0; u < kHeadNormMaxPerLane; ++u)
    if (lane + 32 * u < hd) row[lane + 32 * u] = __float2bfloat16(v[u] * inv * w[lane + 32 * u]);
}

// The gate of a gated MLP: silu(g), or GELU's tanh form written as
// g / (1 + exp(-2u)), u = sqrt(2/pi) (g + 0.044715 g^3), the CPU's operations
// in the CPU's order.
template <bool kGelu>
__device__ __forceinline__ bf16 gate_one(bf16 g_in, bf16 u_in) {
  const float g = __bfloat162float(g_in), u = __bfloat162float(u_in);
  if constexpr (kGelu) {
    const float t = (g * g * g * 0.044715f + g) * -1.5957691216057308f;
    return __float2bfloat16(g / (1.0f + __expf(t)) * u);
  } else {
    return __float2bfloat16(g / (1.0f + __expf(-g)) * u);
  }
}

// Tokens along y, each token's elements along x, V at a time: 16-byte loads
// and stores when V is 8. (One thread per element with a 64-bit division
// to find its token ran at 1.85 TB/s on 8,192 tokens;
// docs/journal/benchmarks-record.md §6.)
template <int V, bool kGelu>
__global__ void gated_kernel(const bf16* gate_up, int64_t n_tokens, int ffn, bf16* out) {
  wait_for_predecessor();
  release_dependents();
  const int per_token = ffn / V;
  for (int64_t t = blockIdx.y; t < n_tokens; t += gridDim.y) {
    const bf16* g_row = gate_up + t * 2 * ffn;
    const bf16* u_row = g_row + ffn;
    bf16* o_row = out + t * ffn;
    for (int j = static_cast<int>(blockIdx.x * blockDim.x + threadIdx.x); j < per_token; j += gridDim.x * blockDim.x) {
      if constexpr (V == 8) {
        const uint4 gv = reinterpret_cast<const uint4*>(g_row)[j], uv = reinterpret_cast<const uint4*>(u_row)[j];
        const bf16* g = reinterpret_cast<const bf16*>(&gv);
        const bf16* u = reinterpret_cast<const bf16*>(&uv);
        uint4 ov;
        bf16* o = reinterpret_cast<bf16*>(&ov);
#pragma unroll
        for (int e = 0; e < 8; ++e) o[e] = gate_one<kGelu>(g[e], u[e]);
        reinterpret_cast<uint4*>(o_row)[j] = ov;
      } else {
        o_row[j] = gate_one<kGelu>(g_row[j], u_row[j]);
      }
    }
  }
}

// (value, index) pairs: the larger value wins, the lower index among equals
// — the host's argmax, whatever order the reduction visits them in.
__device__ void better(float& v, int& i, float ov, int oi) {
  if (ov > v || (ov == v && oi < i)) v = ov, i = oi;
}

__global__ void __launch_bounds__(kRowThreads) row_argmax_kernel(const float* logits, int vocab, int32_t* out,
                                                                  float* probability) {
  wait_for_predecessor();
  release_dependents();
  const float* row = logits + int64_t{blockIdx.x} * vocab;
  float v = -INFINITY;
  int i = vocab;  // sentinel: loses to any real index at the same value
  for (int j = threadIdx.x; j < vocab; j += kRowThreads) better(v, i, row[j], j);
  for (int offset = 16; offset > 0; offset >>= 1)
    better(v, i, __shfl_xor_sync(0xffffffffu, v, offset), __shfl_xor_sync(0xffffffffu, i, offset));
  __shared__ float vs[kRowThreads / 32];
  __shared__ int is[kRowThreads / 32];
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (lane == 0) vs[warp] = v, is[warp] = i;
  __syncthreads();
  if (threadIdx.x == 0) {
    for (int w = 1; w < kRowThreads / 32; ++w) better(v, i, vs[w], is[w]);
    out[blockIdx.x] = i < vocab ? i : 0;  // all -inf (or NaN): index 0, as the host's scan gives
    vs[0] = v;
  }
  if (probability == nullptr) return;
  // The winner's probability at temperature 1: 1 / sum_j exp(l_j - max).
  __syncthreads();
  const float top = vs[0];
  float sum = 0.0f;
  if (top != -INFINITY)
    for (int j = threadIdx.x; j < vocab; j += kRowThreads) sum += __expf(row[j] - top);
  sum = block_sum(sum);
  if (threadIdx.x == 0) probability[blockIdx.x] = sum > 0.0f ? 1.0f / sum : 1.0f;
}

__device__ uint64_t splitmix64(uint64_t z) {
  z += 0x9e3779b97f4a7c15ull;
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

__global__ void fill_uniform_kernel(bf16* out, int64_t n, float scale, uint64_t seed) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x) {
    const float u = static_cast<float>(splitmix64(seed ^ static_cast<uint64_t>(i)) >> 40) * 0x1p-24f;  // [0, 1)
    out[i] = __float2bfloat16((2.0f * u - 1.0f) * scale);
  }
}

__global__ void fill_f32_kernel(float* out, int64_t n, float value) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    out[i] = value;
}

unsigned grid_for(int64_t n, int threads) {
  return static_cast<unsigned>(std::min<int64_t>((n + threads - 1) / threads, 132 * 32));
}

}  // namespace

void embedding_lookup(const void* table, const int32_t* tokens, int64_t n_tokens, int dim, int vocab, float* x,
                      cudaStream_t stream, float scale) {
  if (n_tokens == 0) return;
  embedding_kernel<<<static_cast<unsigned>(n_tokens), 256, 0, stream>>>(static_cast<const bf16*>(table), tokens, dim,
                                                                        vocab, scale, x);
  check_launch("embedding_lookup");
}

void embed_beside_bf16(const void* table, const int32_t* tokens, const void* side, int64_t n_tokens, int dim,
                       int vocab, void* out, cudaStream_t stream) {
  if (n_tokens == 0) return;
  embed_beside_kernel<<<static_cast<unsigned>(n_tokens), 256, 0, stream>>>(
      static_cast<const bf16*>(table), tokens, static_cast<const bf16*>(side), dim, vocab, static_cast<bf16*>(out));
  check_launch("embed_beside_bf16");
}

void rmsnorm_bf16(const float* x, const float* weight, const int32_t* rows, int64_t n, int dim, float eps, void* out,
                  cudaStream_t stream) {
  if (n == 0) return;
  const bool vectorised = dim % 4 == 0 && dim <= kNormVectors * 4 * kRowThreads && aligned16(x) && aligned16(weight);
  launch_dependent("rmsnorm_bf16", LaunchRole::kOther, rmsnorm_kernel<false>, static_cast<unsigned>(n), kRowThreads,
                   0, stream, x, weight, rows, dim, eps, vectorised, out);
}

void add_rmsnorm_f32(const float* y, const float* weight, int64_t n, int dim, float eps, float* x,
                     cudaStream_t stream) {
  if (n == 0) return;
  const bool vectorised =
      dim % 4 == 0 && dim <= kNormVectors * 4 * kRowThreads && aligned16(y) && aligned16(weight) && aligned16(x);
  launch_dependent("add_rmsnorm_f32", LaunchRole::kOther, rmsnorm_kernel<true>, static_cast<unsigned>(n), kRowThreads,
                   0, stream, y, weight, static_cast<const int32_t*>(nullptr), dim, eps, vectorised,
                   static_cast<void*>(x));
}

// Every finite logit becomes cap * tanh(logit / cap) (the CPU's
// cap_and_argmax); -inf stays.
__global__ void softcap_kernel(float* logits, int64_t n, float cap) {
  for (int64_t i = blockIdx.x * int64_t{blockDim.x} + threadIdx.x; i < n; i += int64_t{gridDim.x} * blockDim.x)
    if (isfinite(logits[i])) logits[i] = cap * tanhf(logits[i] / cap);
}

void softcap_f32(float* logits, int64_t n, float cap, cudaStream_t stream) {
  if (n == 0) return;
  softcap_kernel<<<static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 132 * 16)), 256, 0, stream>>>(logits, n,
                                                                                                           cap);
  check_launch("softcap_f32");
}

void rope_and_store(const RopeStoreArgs& args, const PagedKVDevice& cache, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(cache.dtype == DType::bf16, "rope_and_store: the KV cache must be bf16");
  EXACTLY_CUDA_REQUIRE(args.rope_dims % 2 == 0 && args.rope_dims > 0 && args.rope_dims <= cache.head_dim,
                       "rope_and_store: rope_dims %d with head_dim %d", args.rope_dims, cache.head_dim);
  EXACTLY_CUDA_REQUIRE(cache.head_dim <= 256, "rope_and_store: head_dim %d above 256", cache.head_dim);
  if (args.n_tokens == 0) return;
  if (args.angles != nullptr && args.rope_dims == cache.head_dim && cache.head_dim % 8 == 0 && aligned16(args.qkv) &&
      aligned16(args.q_out) && aligned16(cache.k) && aligned16(cache.v)) {
    const int units = (args.n_heads + 2 * cache.n_kv_heads) * (cache.head_dim / 8);
    launch_dependent("rope_and_store", LaunchRole::kOther, rope_store_wide_kernel,
                     dim3(static_cast<unsigned>(args.n_tokens),
                          static_cast<unsigned>((units + kRopeWideThreads - 1) / kRopeWideThreads)),
                     kRopeWideThreads, 0, stream, args, cache);
    return;
  }
  const int pair_items = (args.n_heads + cache.n_kv_heads) * (cache.head_dim / 2);
  const int qk_blocks = (pair_items + kRopeThreads - 1) / kRopeThreads;
  const int v_blocks = (cache.n_kv_heads * cache.head_dim + kRopeVElements - 1) / kRopeVElements;
  launch_dependent("rope_and_store", LaunchRole::kOther, rope_store_kernel,
                   dim3(static_cast<unsigned>(args.n_tokens), static_cast<unsigned>(qk_blocks + v_blocks)),
                   kRopeThreads, 0, stream, args, cache, qk_blocks);
}

void head_rmsnorm(const HeadNormArgs& args, cudaStream_t stream) {
  EXACTLY_CUDA_REQUIRE(args.head_dim > 0 && args.head_dim <= 32 * kHeadNormMaxPerLane,
                       "head_rmsnorm: head_dim %d above %d", args.head_dim, 32 * kHeadNormMaxPerLane);
  if (args.n_tokens == 0) return;
  const int heads = args.n_heads + args.n_kv_heads * (args.bias != nullptr ? 2 : 1);
  launch_dependent("head_rmsnorm", LaunchRole::kOther, head_rmsnorm_kernel,
                   dim3(static_cast<unsigned>(args.n_tokens),
                        static_cast<unsigned>((heads + kHeadNormWarps - 1) / kHeadNormWarps)),
                   kHeadNormWarps * 32, 0, stream, args);
}

void swiglu(const void* gate_up, int64_t n_tokens, int ffn_dim, void* out, cudaStream_t stream) {
  gated_activation(gate_up, n_tokens, ffn_dim, out, GateActivation::kSilu, stream);
}

void gated_activation(const void* gate_up, int64_t n_tokens, int ffn_dim, void* out, GateActivation act,
                      cudaStream_t stream) {
  if (n_tokens == 0 || ffn_dim == 0) return;
  // 16-byte accesses need rows that are whole 16-byte units, on buffers that
  // start on one (device allocations do).
  const bool wide = ffn_dim % 8 == 0 && aligned16(gate_up) && aligned16(out);
  constexpr int kThreads = 128;
  const int per_token = wide ? ffn_dim / 8 : ffn_dim;
  const int64_t x = (per_token + kThreads - 1) / kThreads;
  const dim3 grid(static_cast<unsigned>(x),
                  static_cast<unsigned>(std::clamp<int64_t>(132 * 64 / x, 1, std::min<int64_t>(n_tokens, 65535))));
  const bool gelu = act == GateActivation::kGeluTanh;
  auto* kernel = wide ? (gelu ? gated_kernel<8, true> : gated_kernel<8, false>)
                      : (gelu ? gated_kernel<1, true> : gated_kernel<1, false>);
  launch_dependent("gated_activation", LaunchRole::kOther, kernel, grid, kThreads, 0, stream,
                   static_cast<const bf16*>(gate_up), n_tokens, ffn_dim, static_cast<bf16*>(out));
}

void rope_angles(const int32_t* positions, int64_t n_tokens, int rope_dims, float freq_base, void* out,
                 cudaStream_t stream, const float* divisors, float magnitude) {
  EXACTLY_CUDA_REQUIRE(rope_dims % 2 == 0 && rope_dims > 0 && rope_dims <= 256, "rope_angles: rope_dims %d",
                       rope_dims);
  if (n_tokens == 0) return;
  const dim3 grid(1, static_cast<unsigned>(std::min<int64_t>(n_tokens, 65535)));
  launch_dependent("rope_angles", LaunchRole::kOther, rope_angles_kernel, grid, std::max(32, rope_dims / 2), 0,
                   stream, positions, n_tokens, rope_dims, freq_base, divisors, magnitude,
                   static_cast<float2*>(out));
}

void row_argmax(const float* logits, int64_t rows, int vocab, int32_t* out, cudaStream_t stream,
                float* probability) {
  if (rows == 0) return;
  launch_dependent("row_argmax", LaunchRole::kOther, row_argmax_kernel, static_cast<unsigned>(rows), kRowThreads, 0,
                   stream, logits, vocab, out, probability);
}

void fill_uniform_bf16(void* out, int64_t n, float scale, uint64_t seed, cudaStream_t stream) {
  if (n == 0) return;
  fill_uniform_kernel<<<grid_for(n, 256), 256, 0, stream>>>(static_cast<bf16*>(out), n, scale, seed);
  check_launch("fill_uniform_bf16");
}

void fill_f32(float* out, int64_t n, float value, cudaStream_t stream) {
  if (n == 0) return;
  fill_f32_kernel<<<grid_for(n, 256), 256, 0, stream>>>(out, n, value);
  check_launch("fill_f32");
}

}  // namespace exactly::kernels::cuda
