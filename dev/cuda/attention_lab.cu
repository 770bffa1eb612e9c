// Kernel lab for the attention kernels: the versions that mattered, side by
// side, each validated against a float64 CPU reference on a small problem and
// then timed on the benchmark shape. The production kernels live in
// src/kernels/cuda/; the versions here are their template parameters (the
// Hopper prefill's as named features and a hook for the ablations, probes
// and traces: variants/flash_prefill_sm90_lab.cuh), a few kernels of their
// own in variants/, and a naive baseline, so a change can be tried without
// touching production.
//
// VERSION: N, N-M, or -N (N and after).
//   attention_lab decode  [VERSION]   batch 64 x 2048 and 16 x 8192, 32/8 heads, d 128
//   attention_lab prefill [VERSION]   batch 4 x 32 heads x 4096, d 128, causal and not
//   attention_lab prefill64 [VERSION] the same at d 64
//   attention_lab prefill-items [VERSION]  each item's time beyond its tiles
//   attention_lab prefill16k [VERSION]     1 x 32 heads x 16384, d 128, causal and not
//   attention_lab prefill-b64 [VERSION]    the prefill shapes through 64-key blocks
//   attention_lab prefill-probe            where v46 / v45's consumers wait for K and V
//   attention_lab prefill-trace [VERSION]  CTA 0's two consumer warpgroups step by step (v71)
//   attention_lab prefill-same             versions that must agree bit for bit (clusters, item order)
//   attention_lab prefill-ab A B           versions A and B in turns over the 512-16k sweep (prefill64-ab: d 64)
// Without VERSION every version runs. NOTES.md beside this file records each
// version's prediction and outcome.
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <string>
#include <thread>
#include <vector>

#include "lab_common.h"
#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "variants/flash_prefill_sm90_sync.cuh"
#include "kernels/cuda/flash_prefill_sm90_ws.cuh"
#include "variants/flash_prefill_sm90_serial.cuh"
#include "variants/flash_prefill_sm90_ws_v12.cuh"
#include "variants/flash_prefill_sm90_ws_v32.cuh"
#include "variants/flash_prefill_sm90_ablate.cuh"
#include "variants/flash_prefill_sm90_lab.cuh"
#include "kernels/cuda/paged_decode_kernel.cuh"

using namespace exactly::kernels::cuda;
using bf16 = __nv_bfloat16;


// Standard normal bf16 values, drawn in chunks on every host thread (the
// benchmark shapes hold 10^8 of them): chunk i from its own generator, so the
// values depend on the seed alone, not on the thread count.
static void fill_normal(std::vector<bf16>& x, uint32_t seed) {
  constexpr size_t kChunk = size_t{1} << 20;
  const size_t chunks = (x.size() + kChunk - 1) / kChunk;
  std::atomic<size_t> next{0};
  auto work = [&] {
    for (size_t c; (c = next.fetch_add(1)) < chunks;) {
      std::mt19937 rng(seed * 1000003u + static_cast<uint32_t>(c));
      std::normal_distribution<float> normal;
      for (size_t i = c * kChunk; i < std::min(x.size(), (c + 1) * kChunk); ++i) x[i] = __float2bfloat16(normal(rng));
    }
  };
  std::vector<std::thread> threads(std::max(1u, std::thread::hardware_concurrency()));
  for (auto& t : threads) t = std::thread(work);
  for (auto& t : threads) t.join();
}

// ---- problem: a paged batch with a shuffled block table -------------------
struct Problem {
  int n_seqs, q_len, ctx, n_heads, n_kv, d = 128, block_size = 16;
  bool causal = true;
  std::vector<bf16> k, v, q;
  std::vector<int32_t> query_start, seq_lens, tables;
  int max_blocks;
  bf16 *dk, *dv, *dq, *dout;
  int32_t *dqs, *dsl, *dtab;
  float* ws;

  Problem(int seqs, int qlen, int context, int heads, int kv, bool is_causal, uint32_t seed, int head_dim = 128,
          int block = 16)
      : n_seqs(seqs), q_len(qlen), ctx(context), n_heads(heads), n_kv(kv), d(head_dim), block_size(block),
        causal(is_causal) {
    std::mt19937 rng(seed);
    max_blocks = (ctx + block_size - 1) / block_size;
    const int64_t num_blocks = int64_t{n_seqs} * max_blocks;
    std::vector<int32_t> perm(num_blocks);
    for (int64_t i = 0; i < num_blocks; ++i) perm[i] = static_cast<int32_t>(i);
    std::shuffle(perm.begin(), perm.end(), rng);
    tables = perm;
    const int64_t kv_elems = num_blocks * block_size * n_kv * d;
    k.resize(kv_elems), v.resize(kv_elems), q.resize(int64_t{n_seqs} * q_len * n_heads * d);
    fill_normal(k, seed * 3 + 0);
    fill_normal(v, seed * 3 + 1);
    fill_normal(q, seed * 3 + 2);
    for (int s = 0; s <= n_seqs; ++s) query_start.push_back(s * q_len);
    seq_lens.assign(n_seqs, ctx);
    auto up = [](auto& host, auto** dev) {
      CK(cudaMalloc(dev, host.size() * sizeof(host[0])));
      CK(cudaMemcpy(*dev, host.data(), host.size() * sizeof(host[0]), cudaMemcpyHostToDevice));
    };
    up(k, &dk);
    up(v, &dv);
    up(q, &dq);
    up(query_start, &dqs);
    up(seq_lens, &dsl);
    up(tables, &dtab);
    CK(cudaMalloc(&dout, q.size() * sizeof(bf16)));
    const int parts = (ctx + 255) / 256;  // the smallest partition any version uses
    CK(cudaMalloc(&ws, int64_t{n_seqs} * n_heads * std::max(parts, 1) * (d + 1) * sizeof(float)));
  }
  Problem(const Problem&) = delete;  // owns device memory; lambdas must capture fields, not the problem
  ~Problem() {
    for (void* p : {(void*)dk, (void*)dv, (void*)dq, (void*)dout, (void*)dqs, (void*)dsl, (void*)dtab, (void*)ws})
      cudaFree(p);
  }
  float kv_at(const std::vector<bf16>& cache, int s, int j, int h, int i) const {
    const int64_t slot = int64_t{tables[int64_t{s} * max_blocks + j / block_size]} * block_size + j % block_size;
    return __bfloat162float(cache[(slot * n_kv + h) * d + i]);
  }
  // Max |out - float64 reference| over a sample of rows.
  double max_error(int row_stride) const {
    std::vector<bf16> out(q.size());
    CK(cudaMemcpy(out.data(), dout, out.size() * sizeof(bf16), cudaMemcpyDeviceToHost));
    double worst = 0;
    const int group = n_heads / n_kv;
    for (int s = 0; s < n_seqs; ++s)
      for (int t = 0; t < q_len; t += row_stride)
        for (int h = 0; h < n_heads; ++h) {
          const int pos = ctx - q_len + t, last = causal ? pos : ctx - 1;
          const bf16* qr = &q[((int64_t{s} * q_len + t) * n_heads + h) * d];
          std::vector<double> sc(last + 1);
          double mx = -1e300;
          for (int j = 0; j <= last; ++j) {
            double acc = 0;
            for (int i = 0; i < d; ++i) acc += double(__bfloat162float(qr[i])) * kv_at(k, s, j, h / group, i);
            sc[j] = acc / std::sqrt(double(d));
            mx = std::max(mx, sc[j]);
          }
          double sum = 0;
          for (double& x : sc) sum += (x = std::exp(x - mx));
          for (int i = 0; i < d; ++i) {
            double acc = 0;
            for (int j = 0; j <= last; ++j) acc += sc[j] * kv_at(v, s, j, h / group, i);
            const double got = __bfloat162float(out[((int64_t{s} * q_len + t) * n_heads + h) * d + i]);
            worst = std::max(worst, std::isfinite(got) ? std::fabs(got - acc / sum) : 1e30);
          }
        }
    return worst;
  }
};

// Median over reps of the mean of kInner back-to-back launches, so that the
// launch gap of one call does not count as kernel time.
static float median_ms(const std::function<void()>& launch, int reps = 30) {
  constexpr int kInner = 10;
  for (int i = 0; i < 3; ++i) launch();
  CK(cudaDeviceSynchronize());
  std::vector<float> t;
  cudaEvent_t a, b;
  CK(cudaEventCreate(&a));
  CK(cudaEventCreate(&b));
  for (int i = 0; i < reps; ++i) {
    CK(cudaEventRecord(a));
    for (int j = 0; j < kInner; ++j) launch();
    CK(cudaEventRecord(b));
    CK(cudaEventSynchronize(b));
    float ms;
    CK(cudaEventElapsedTime(&ms, a, b));
    t.push_back(ms / kInner);
  }
  CK(cudaGetLastError());
  std::sort(t.begin(), t.end());
  return t[t.size() / 2];
}

// ---- decode versions --------------------------------------------------------
// v1: the obvious kernel: one warp per (sequence, query head), all keys in
// one pass, fp32 dot products with shuffles. No split, no GQA sharing.
__global__ void decode_naive(DecodeParams p) {
  const int seq = blockIdx.y, head = blockIdx.x * (blockDim.x / 32) + threadIdx.x / 32, lane = threadIdx.x % 32;
  if (head >= p.n_heads) return;
  const int ctx = p.seq_lens[seq], kvh = head / p.group;
  const bf16* q = static_cast<const bf16*>(p.q) + (int64_t{seq} * p.n_heads + head) * 128;
  float qv[4], acc[4] = {0, 0, 0, 0}, m = -INFINITY, l = 0;
  for (int i = 0; i < 4; ++i) qv[i] = __bfloat162float(q[lane * 4 + i]);
  for (int j = 0; j < ctx; ++j) {
    const int64_t slot = int64_t{p.block_tables[int64_t{seq} * p.max_blocks_per_seq + j / p.block_size]} *
                             p.block_size + j % p.block_size;
    const bf16* kr = static_cast<const bf16*>(p.k_cache) + (slot * p.n_kv_heads + kvh) * 128 + lane * 4;
    const bf16* vr = static_cast<const bf16*>(p.v_cache) + (slot * p.n_kv_heads + kvh) * 128 + lane * 4;
    float dot = 0;
    for (int i = 0; i < 4; ++i) dot += qv[i] * __bfloat162float(kr[i]);
    for (int o = 16; o; o /= 2) dot += __shfl_xor_sync(0xffffffffu, dot, o);
    const float sc = dot * p.scale_log2, mn = fmaxf(m, sc), c = exp2f(m - mn), e = exp2f(sc - mn);
    l = l * c + e;
    for (int i = 0; i < 4; ++i) acc[i] = acc[i] * c + e * __bfloat162float(vr[i]);
    m = mn;
  }
  bf16* out = static_cast<bf16*>(p.out) + (int64_t{seq} * p.n_heads + head) * 128;
  for (int i = 0; i < 4; ++i) out[lane * 4 + i] = __float2bfloat16(acc[i] / l);
}

DecodeParams decode_params(const Problem& pr, int part = 512) {
  const int group = pr.n_heads / pr.n_kv;
  const int parts = (pr.ctx + part - 1) / part;
  const PagedAttentionParams<void> base{pr.dq,         pr.dout,      pr.dk,      pr.dv,
                                       pr.dqs,        pr.dsl,       pr.dtab,    pr.max_blocks,
                                       pr.block_size, pr.n_kv,      pr.n_heads, group,
                                       1.4426950408889634f / std::sqrt(128.f)};
  return DecodeParams{base, (group + 15) / 16, parts, pr.ws, pr.ws + int64_t{pr.n_seqs} * pr.n_heads * parts * 128};
}

template <int WARPS, int STAGES, bool QREGS, int MINB, int PART = 512>
std::function<void()> split_decode(const Problem& pr) {
  using S = DecodeShape<128, WARPS, STAGES>;
  auto kernel = paged_decode_kernel<bf16, 128, WARPS, STAGES, PART, QREGS, MINB>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
  const DecodeParams p = decode_params(pr, PART);
  const int n_seqs = pr.n_seqs;
  return [=] {
    kernel<<<dim3(p.max_parts, p.n_kv_heads * p.row_groups, n_seqs), S::kThreads, S::kSmemBytes>>>(p);
    if (p.max_parts > 1) merge_partitions_kernel<bf16, 128, PART><<<dim3(p.n_heads, n_seqs), 128>>>(p);
  };
}

struct Version {
  const char* name;
  std::function<std::function<void()>(const Problem&)> make;
};

static const std::vector<Version> kDecodeVersions = {
    {"v1 naive: warp per head, no split, no GQA sharing",
     [](const Problem& pr) -> std::function<void()> {
       const DecodeParams p = decode_params(pr);
       const int n_seqs = pr.n_seqs;
       return [=] { decode_naive<<<dim3((p.n_heads + 3) / 4, n_seqs), 128>>>(p); };
     }},
    {"v2 split-KV mma, 4 warps, 3 stages, q in registers", split_decode<4, 3, true, 1>},
    {"v3 as v2, q from shared memory, 3 CTAs/SM, 2 stages", split_decode<4, 2, false, 3>},
    {"v4 as v2, q from shared memory, 2 CTAs/SM, 3 stages", split_decode<4, 3, false, 2>},
    {"v5 8 warps, 2 stages, q from shared memory, 2 CTAs/SM", split_decode<8, 2, false, 2>},
    {"v6 4 warps, 4 stages, q from shared memory, 2 CTAs/SM", split_decode<4, 4, false, 2>},
    {"v7 as v3 with 256-key partitions", split_decode<4, 2, false, 3, 256>},
    {"v8 as v4 with 1024-key partitions", split_decode<4, 3, false, 2, 1024>},
    {"v9 as v3 with 1024-key partitions", split_decode<4, 2, false, 3, 1024>},
};

// ---- prefill versions -------------------------------------------------------
template <int WARPS, int BN, int MT, int D = 128>
std::function<void()> prefill(const Problem& pr) {
  using S = PrefillShape<D, WARPS, BN, MT>;
  auto kernel = flash_prefill_kernel<bf16, D, WARPS, BN, MT>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
  const PrefillParams p{pr.dq,      pr.dout,       pr.dk,   pr.dv,      pr.dqs,
                        pr.dsl,     pr.dtab,       pr.max_blocks, pr.block_size, pr.n_kv,
                        pr.n_heads, pr.n_heads / pr.n_kv, 1.4426950408889634f / std::sqrt(float(D)), pr.causal};
  const dim3 grid((pr.q_len + S::kBM - 1) / S::kBM, pr.n_heads, pr.n_seqs);
  return [=] { kernel<<<grid, S::kThreads, S::kSmemBytes>>>(p); };
}

template <int BN>
std::function<void()> prefill_sm90(const Problem& pr) {
  using S = Sm90PrefillShape<BN>;
  auto kernel = flash_prefill_sm90_kernel<BN>;
  CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
  const PrefillParams p{pr.dq,      pr.dout,       pr.dk,   pr.dv,      pr.dqs,
                        pr.dsl,     pr.dtab,       pr.max_blocks, pr.block_size, pr.n_kv,
                        pr.n_heads, pr.n_heads / pr.n_kv, 1.4426950408889634f / std::sqrt(128.f), pr.causal};
  const dim3 grid((pr.q_len + S::kBM - 1) / S::kBM, pr.n_heads, pr.n_seqs);
  return [=] { kernel<<<grid, S::kThreads, S::kSmemBytes>>>(p); };
}

enum class Consumers { kV12, kV20, kSerial1, kSerial2, kSerial4, kNoSoftmax, kNoFeed, kNeither, kBigBoxes, kPlain, kV32 };

// GROUP: keys per bulk copy of K/V (a divisor of the problem's block size);
// QTMA: each item's Q copied into shared memory by the producer; TAIL: the
// last heads' items handed out longest first (sm90_ws_tail_heads); SPLIT:
// without a mask, the items of the last round split over their keys
// (sm90_ws_split); WG: consumer warpgroups.
template <int BN, int STAGES, Consumers kConsumers = Consumers::kPlain, int D = 128, bool PERSISTENT = false,
          int ABLATE = kSm90Exact, int CLUSTER = 1, int GROUP = 16, bool QTMA = false, bool TAIL = false,
          bool SPLIT = false, int WG = 2>
std::function<void()> prefill_sm90_ws(const Problem& pr) {
  using F = LabFeatures<BN, STAGES, D, CLUSTER, ABLATE, GROUP, QTMA, WG>;
  using S = Sm90WsShape<F>;
  static_assert(WG == 2 || (ABLATE & kSm90Trace) == 0, "traces are for two consumer warpgroups");
  const int64_t slots = int64_t{pr.n_seqs} * pr.max_blocks * pr.block_size;
  if (pr.block_size % GROUP != 0) {
    std::fprintf(stderr, "copies of %d keys need a block size that they divide (%d)\n", GROUP, pr.block_size);
    std::exit(1);
  }
  CUtensorMap k_map, v_map, q_map;
  const uint32_t box_slots = kConsumers == Consumers::kBigBoxes ? BN : GROUP;
  if (!make_heads_tensor_map(&k_map, pr.dk, slots, pr.n_kv, D, true, box_slots) ||
      !make_heads_tensor_map(&v_map, pr.dv, slots, pr.n_kv, D, true, box_slots) ||
      !make_heads_tensor_map(&q_map, pr.dq, int64_t{pr.n_seqs} * pr.q_len, pr.n_heads, D, true, S::kBM)) {
    std::fprintf(stderr, "tensor map creation failed\n");
    std::exit(1);
  }
  const PrefillParams p{pr.dq,      pr.dout,       pr.dk,   pr.dv,      pr.dqs,
                        pr.dsl,     pr.dtab,       pr.max_blocks, pr.block_size, pr.n_kv,
                        pr.n_heads, pr.n_heads / pr.n_kv, 1.4426950408889634f / std::sqrt(float(D)), pr.causal};
  if constexpr (kConsumers == Consumers::kPlain || kConsumers == Consumers::kV32) {  // plain grid or persistent
    auto kernel = [] {  // v32 exists for 64- and 128-key tiles only
      if constexpr (kConsumers == Consumers::kV32) {
        return flash_prefill_sm90_ws_v32_kernel<BN, STAGES, D>;
      } else {
        return flash_prefill_sm90_ws_kernel<F, LabHook<ABLATE>>;
      }
    }();
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
    static int32_t* counter = [] {
      int32_t* c = nullptr;
      CK(cudaMalloc(&c, 2 * sizeof(int32_t)));
      CK(cudaMemset(c, 0, 2 * sizeof(int32_t)));
      return c;
    }();
    int sms = 0;
    CK(cudaDeviceGetAttribute(&sms, cudaDevAttrMultiProcessorCount, 0));
    const int n_mblocks = (pr.q_len + S::kBM - 1) / S::kBM;
    const int per_head = (n_mblocks + CLUSTER - 1) / CLUSTER;
    const int fit = CLUSTER > 1 ? sm90_ws_max_clusters(kernel, CLUSTER, S::kSmemBytes) : sms;
    const int64_t n_seq_heads = int64_t{pr.n_heads} * pr.n_seqs;
    Sm90WsSchedule sched{n_mblocks, per_head * pr.n_heads * pr.n_seqs, PERSISTENT ? counter : nullptr,
                         TAIL ? sm90_ws_tail_heads(n_seq_heads, per_head, fit, pr.causal) : 0};
    if (SPLIT && PERSISTENT) {
      static const std::pair<float*, int32_t*> workspace = [sms] {
        float* partials = nullptr;
        int32_t* arrivals = nullptr;
        CK(cudaMalloc(&partials, size_t{16} * sms * Sm90WsPartial<D>::kChunks * S::kConsumerThreads));
        CK(cudaMalloc(&arrivals, sms * S::kConsumerWarps * sizeof(int32_t)));
        CK(cudaMemset(arrivals, 0, sms * S::kConsumerWarps * sizeof(int32_t)));
        return std::pair{partials, arrivals};
      }();
      sched.partials = workspace.first;
      sched.arrivals = workspace.second;
      sched.n_items = static_cast<int32_t>(sm90_ws_split(sched, sched.n_items, fit, (pr.ctx + BN - 1) / BN, pr.causal));
    }
    if constexpr (CLUSTER > 1) {
      const int grid = (PERSISTENT ? std::min(sched.n_items, fit) : sched.n_items) * CLUSTER;
      return [=] {
        CK(sm90_ws_launch(kernel, grid, CLUSTER, S::kSmemBytes, nullptr, k_map, v_map, q_map, p, sched));
      };
    }
    const int grid = PERSISTENT ? std::min(sched.n_items, sms) : sched.n_items;
    return [=] { kernel<<<grid, S::kThreads, S::kSmemBytes>>>(k_map, v_map, q_map, p, sched); };
  } else {
    auto kernel = kConsumers == Consumers::kSerial1   ? flash_prefill_sm90_serial_kernel<BN, STAGES, 1>
                  : kConsumers == Consumers::kSerial2   ? flash_prefill_sm90_serial_kernel<BN, STAGES, 2>
                  : kConsumers == Consumers::kSerial4   ? flash_prefill_sm90_serial_kernel<BN, STAGES, 4>
                  : kConsumers == Consumers::kV20       ? flash_prefill_sm90_ablate_kernel<BN, STAGES, true, true>
                  : kConsumers == Consumers::kNoSoftmax ? flash_prefill_sm90_ablate_kernel<BN, STAGES, false, true>
                  : kConsumers == Consumers::kNoFeed    ? flash_prefill_sm90_ablate_kernel<BN, STAGES, true, false>
                  : kConsumers == Consumers::kNeither   ? flash_prefill_sm90_ablate_kernel<BN, STAGES, false, false>
                  : kConsumers == Consumers::kBigBoxes ? flash_prefill_sm90_ablate_kernel<BN, STAGES, true, true, true>
                                                        : flash_prefill_sm90_ws_v12_kernel<BN, STAGES>;
    CK(cudaFuncSetAttribute(kernel, cudaFuncAttributeMaxDynamicSharedMemorySize, S::kSmemBytes));
    const dim3 grid((pr.q_len + S::kBM - 1) / S::kBM, pr.n_heads, pr.n_seqs);
    return [=] { kernel<<<grid, S::kThreads, S::kSmemBytes>>>(k_map, v_map, p); };
  }
}

static const std::vector<Version> kPrefillVersions = {
    {"v1 4 warps x 16 rows, 64-key tiles, q in registers", prefill<4, 64, 1>},
    {"v2 4 warps x 32 rows, 64-key tiles, q from shared memory", prefill<4, 64, 2>},
    {"v3 4 warps x 32 rows, 32-key tiles", prefill<4, 32, 2>},
    {"v4 8 warps x 16 rows, 64-key tiles", prefill<8, 64, 1>},
    {"v5 wgmma: 2 warpgroups x 64 rows, 64-key tiles", prefill_sm90<64>},
    {"v6 wgmma: 2 warpgroups x 64 rows, 128-key tiles", prefill_sm90<128>},
    {"v12 TMA producer warpgroup + 2 consumers, 128-key tiles, 3 stages", prefill_sm90_ws<128, 3, Consumers::kV12>},
    {"v20 v12 with a lean softmax (FFMA + MUFU per score, masks on edges)", prefill_sm90_ws<128, 3, Consumers::kV20>},
    {"v27 v20 + a tile's lookups in flight, K and V on own barriers", prefill_sm90_ws<128, 3, Consumers::kSerial1>},
    {"v28 v27 with two producer warps issuing copies", prefill_sm90_ws<128, 3, Consumers::kSerial2>},
    {"v29 v27 with four producer warps issuing copies", prefill_sm90_ws<128, 3, Consumers::kSerial4>},
    {"v22 v29 + softmax of tile t under P V of tile t-1", prefill_sm90_ws<128, 3>},
    {"v32 v22 persistent: items from a global counter, the producer running on",
     prefill_sm90_ws<128, 3, Consumers::kV32, 128, true>},
    {"v40 v32 with items pipelined into one another (production under a causal mask before v46)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true>},
    {"v42 v40 in clusters of two: query block pairs share K/V (multicast; production without a mask before v46)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Exact, 2>},
    {"a1 timing only: v20 without softmax", prefill_sm90_ws<128, 3, Consumers::kNoSoftmax>},
    {"a2 timing only: v20 without feeding (stages reused)", prefill_sm90_ws<128, 3, Consumers::kNoFeed>},
    {"a3 timing only: v20 with neither", prefill_sm90_ws<128, 3, Consumers::kNeither>},
    {"a4 timing only: v20 with one copy per 128-key panel", prefill_sm90_ws<128, 3, Consumers::kBigBoxes>},
    {"a5 timing only: v40 without feeding after the first stages",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90NoFeedAfterFill>},
    {"a6 timing only: v40 feeding every other tile",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90FeedEveryOtherTile>},
    {"a7 timing only: v40 with Q loaded for the first item only",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90QOnce>},
    {"a8 timing only: v40 without softmax", prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90NoSoftmax>},
    {"v45 v40 with each item's Q copied into shared memory by the producer",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Exact, 1, 16, true>},
    {"v46 v42 with each item's Q copied into shared memory by the producer (production before v51)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Exact, 2, 16, true>},
    {"a9 timing only: v46 without feeding after the first stages",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90NoFeedAfterFill, 2, 16, true>},
    {"a10 timing only: v46 without softmax",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90NoSoftmax, 2, 16, true>},
    {"a11 timing only: v46 with neither",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90NoFeedAfterFill | kSm90NoSoftmax, 2, 16, true>},
    {"v46 probed: the consumers count the cycles they wait for K and V",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Probe, 2, 16, true>},
    {"v45 probed", prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Probe, 1, 16, true>},
    {"a9 probed: the probe's own cost, with no copies to wait for",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90NoFeedAfterFill | kSm90Probe, 2, 16, true>},
    {"v51 v46 with the last heads' items longest first across them (production before v53)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Exact, 2, 16, true, true>},
    {"v52 v45 with the last heads' items longest first across them",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Exact, 1, 16, true, true>},
    {"v53 v51 with the last round's items split over their keys without a mask (production before v74)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Exact, 2, 16, true, true, true>},
    {"v54 v52 with the last round's items split over their keys without a mask",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Exact, 1, 16, true, true, true>},
    {"v71 v54 traced: the first warp of each consumer warpgroup of CTA 0 stamps its steps",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90Trace, 1, 16, true, true, true>},
    {"v73 v54 with a step's K and V barriers tested together (production before v85)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90EarlyTests, 1, 16, true, true, true>},
    {"v74 v53 with v73's barrier tests (production before v87)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90EarlyTests, 2, 16, true, true, true>},
    {"v80 v73 without storing the output (timing only: what the stores cost)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90EarlyTests | kSm90NoStore, 1, 16, true, true, true>},
    {"v83 v73 with the next item's first P packed before the output is stored",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90EarlyTests | kSm90PackFirst, 1, 16, true, true, true>},
    {"v85 v83 with the output stored 16 bytes a thread, a quad's words transposed (production before v92)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90EarlyTests | kSm90PackFirst | kSm90QuadStores, 1, 16,
                     true, true, true>},
    {"v87 v74 with v85's packing and stores (production)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true, kSm90EarlyTests | kSm90PackFirst | kSm90QuadStores, 2, 16,
                     true, true, true>},
    {"v92 v85 with K released once its scores are done, V after P V (barriers of their own; production for contexts up to 4096)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 128, true,
                     kSm90EarlyTests | kSm90PackFirst | kSm90QuadStores | kSm90SplitRelease, 1, 16, true, true, true>},

};

// Head dim 64 (the default model's): the mma.sync kernel the launcher used
// before, and the warp-specialised kernel at a few depths of its ring.
static const std::vector<Version> kPrefill64Versions = {
    {"d64 v1 mma.sync, 4 warps x 32 rows, 64-key tiles (production before)", prefill<4, 64, 2, 64>},
    {"d64 v2 warp-specialised, 128-key tiles, 3 stages", prefill_sm90_ws<128, 3, Consumers::kPlain, 64>},
    {"d64 v6 v2 persistent", prefill_sm90_ws<128, 3, Consumers::kV32, 64, true>},
    {"d64 v7 v6 with items pipelined into one another (production before d64 v10)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 64, true>},
    {"d64 v10 v7 with the last heads' items longest first across them (production before d64 v11)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 64, true, kSm90Exact, 1, 16, false, true>},
    {"d64 v11 v10 with the last round's items split over their keys without a mask (production before d64 v21)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 64, true, kSm90Exact, 1, 16, false, true, true>},
    {"d64 v20 d64 v11 with three consumer warpgroups (192-row query blocks, 32 / 160 registers)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 64, true, kSm90Exact, 1, 16, false, true, true, 3>},
    {"d64 v21 d64 v20 with the scores reading Q from shared memory (copied in by the producer; production)",
     prefill_sm90_ws<128, 3, Consumers::kPlain, 64, true, kSm90QShared, 1, 16, true, true, true, 3>},

};

// Which versions run: all, one (N), N and after (-N), or N to M (N-M).
struct Selection {
  int first = 1, last = 1 << 30;
  explicit Selection(const char* arg) {
    if (arg == nullptr || *arg == 0) return;
    const char* dash = std::strchr(arg + 1, '-');
    const int n = std::atoi(arg);
    if (n < 0) {
      first = -n;
    } else if (dash != nullptr) {
      first = n, last = std::atoi(dash + 1);
    } else if (n > 0) {
      first = last = n;
    }
  }
  bool has(int version) const { return version >= first && version <= last; }
};

// Prefill's rate: 4 x rows x keys x d multiply-adds per head, half under a causal mask.
static double prefill_tflops(const Problem& p, float ms) {
  return 4.0 * p.n_seqs * p.n_heads * double(p.q_len) * p.ctx * p.d / (p.causal ? 2 : 1) / ms / 1e9;
}

static bool run_versions(const char* what, const std::vector<Version>& versions, const Selection& only,
                         const std::vector<Problem*>& small, const std::vector<Problem*>& big,
                         const std::function<double(const Problem&, float)>& rate, const char* unit) {
  bool ok = true;
  for (size_t i = 0; i < versions.size(); ++i) {
    if (!only.has(int(i) + 1)) continue;
    double err = 0;
    for (Problem* pr : small) {
      CK(cudaMemset(pr->dout, 0xff, pr->q.size() * sizeof(bf16)));  // NaN poison
      versions[i].make(*pr)();
      CK(cudaDeviceSynchronize());
      err = std::max(err, pr->max_error(7));
    }
    const bool good = err < 2e-2;  // bf16 output rounding is ~4e-3 here; a wrong kernel is O(1)
    const bool timing_only = versions[i].name[0] == 'a';  // an ablation: wrong by design
    ok = ok && (good || timing_only);
    std::printf("  %s %-58s max err %.2e %s |", what, versions[i].name, err,
                timing_only ? "(ablation)" : good ? "ok" : "WRONG");
    for (Problem* pr : big) std::printf(" %7.2f %s", rate(*pr, median_ms(versions[i].make(*pr))), unit);
    std::printf("\n");
  }
  return ok;
}

int main(int argc, char** argv) {
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // each line as it comes, also into a pipe
  const std::string what = argc > 1 ? argv[1] : "all";
  const Selection only(argc > 2 ? argv[2] : nullptr);
  cudaDeviceProp prop;
  CK(cudaGetDeviceProperties(&prop, 0));
  std::printf("lab on %s (%d SMs)\n", prop.name, prop.multiProcessorCount);
  bool ok = true;
  if (what == "all" || what == "decode") {
    Problem s1(3, 1, 1100, 32, 8, true, 1), s2(2, 1, 37, 32, 8, true, 2);
    Problem b1(64, 1, 2048, 32, 8, true, 3), b2(16, 1, 8192, 32, 8, true, 4);
    std::printf("lab decode: TB/s of K+V at 64 x 2048 and 16 x 8192 (32/8 heads, d 128, block 16)\n");
    ok &= run_versions("decode", kDecodeVersions, only, {&s1, &s2}, {&b1, &b2}, [](const Problem& p, float ms) {
      return 2.0 * p.n_seqs * p.ctx * p.n_kv * p.d * 2 / ms / 1e9;
    }, "TB/s");
  }
  if (what == "all" || what == "prefill") {
    Problem s1(2, 200, 300, 4, 2, true, 5), s2(1, 70, 70, 4, 4, false, 6);
    // More query blocks than SMs: a persistent CTA runs several items.
    Problem s3(2, 600, 700, 32, 8, true, 9), s4(3, 130, 130, 32, 8, false, 10);
    Problem b1(4, 4096, 4096, 32, 32, false, 7), b2(4, 4096, 4096, 32, 32, true, 8);
    std::printf("lab prefill: TFLOP/s at 4 x 32 heads x 4096, d 128, non-causal and causal (block 16)\n");
    ok &= run_versions("prefill", kPrefillVersions, only, {&s1, &s2, &s3, &s4}, {&b1, &b2}, prefill_tflops, "TFLOP/s");
  }
  if (what == "prefill-probe") {  // not part of "all": where the consumers of v46 / v45 wait
    Problem b1(4, 4096, 4096, 32, 32, false, 7), b2(4, 4096, 4096, 32, 32, true, 8);
    std::printf("lab prefill-probe: share of the consumer warps' time spent waiting for K and for V\n");
    for (const char* name : {"v46 probed", "v45 probed", "a9 probed"}) {
      for (const auto& v : kPrefillVersions) {
        if (std::strncmp(v.name, name, std::strlen(name)) != 0) continue;
        for (Problem* pr : {&b1, &b2}) {
          auto run = v.make(*pr);
          run();
          CK(cudaDeviceSynchronize());
          const unsigned long long zero[5] = {0, 0, 0, 0, 0};
          CK(cudaMemcpyToSymbol(sm90_ws_probe, zero, sizeof zero));
          for (int i = 0; i < 20; ++i) run();
          CK(cudaDeviceSynchronize());
          unsigned long long c[5];
          CK(cudaMemcpyFromSymbol(c, sm90_ws_probe, sizeof c));
          std::printf("  %s %s: waiting for K %.1f%% / V %.1f%% inside items, K %.1f%% / V %.1f%% between items,"
                      " of the consumers' time\n", name, pr->causal ? "causal" : "non-causal", 100.0 * c[0] / c[4],
                      100.0 * c[1] / c[4], 100.0 * c[2] / c[4], 100.0 * c[3] / c[4]);
        }
      }
    }
  }
  if (what == "prefill-trace") {  // not part of "all": how the two consumer warpgroups of one CTA interleave
    // v71 (or the traced version named) stamps the steps of CTA 0's two
    // consumer warpgroups. Per step: how long each of its phases takes (the
    // stamps themselves slow the kernel by 5-12%); and where the other
    // warpgroup's products finish within this one's period (0: in step with
    // it, 0.5: halfway).
    Problem b1(4, 4096, 4096, 32, 32, false, 7), b2(4, 4096, 4096, 32, 32, true, 8);
    std::printf("lab prefill-trace: CTA 0's consumer warpgroups, clock cycles per step (medians over steps 64-511)\n");
    const Version* traced = nullptr;
    for (const auto& v : kPrefillVersions)
      if (std::strncmp(v.name, argc >= 3 ? argv[2] : "v71 ", argc >= 3 ? std::strlen(argv[2]) : 4) == 0) traced = &v;
    for (Problem* pr : {&b1, &b2}) {
      auto run = traced->make(*pr);
      for (int i = 0; i < 5; ++i) run();
      CK(cudaDeviceSynchronize());
      static long long t[2][kSm90TraceSteps][kSm90TracePoints];
      CK(cudaMemcpyFromSymbol(t, sm90_ws_trace, sizeof t));
      auto median = [](std::vector<double> x) {
        std::sort(x.begin(), x.end());
        return x.empty() ? 0.0 : x[x.size() / 2];
      };
      std::printf("  %s\n", pr->causal ? "causal" : "non-causal");
      static const char* kPhases[kSm90TracePoints - 1] = {"K wait",  "scores issue", "O rescale", "V wait",
                                                          "P V issue", "scores wait", "P V wait + softmax",
                                                          "release + pack"};
      for (int wg = 0; wg < 2; ++wg) {
        std::vector<double> phase_len[kSm90TracePoints - 1], period, phase;
        for (int i = 64; i + 1 < kSm90TraceSteps; ++i) {
          const long long* a = t[wg][i];
          for (int k = 0; k + 1 < kSm90TracePoints; ++k) phase_len[k].push_back(a[k + 1] - a[k]);
          const double per = t[wg][i + 1][7] - a[7];
          period.push_back(per);
          // the other warpgroup's first "products done" at or after this one's
          for (int j = 0; j < kSm90TraceSteps; ++j)
            if (t[1 - wg][j][7] >= a[7]) {
              if (per > 0) phase.push_back((t[1 - wg][j][7] - a[7]) / per);
              break;
            }
        }
        std::printf("    warpgroup %d:", wg);
        for (int k = 0; k + 1 < kSm90TracePoints; ++k) std::printf(" %s %.0f,", kPhases[k], median(phase_len[k]));
        std::printf(" period %.0f; the other's products done %.2f of a period later\n", median(period),
                    median(phase));
      }
      std::printf("    steps 100-107, warpgroup 0 then 1 (products done, relative to warpgroup 0's step 100):\n     ");
      for (int wg = 0; wg < 2; ++wg) {
        for (int i = 100; i < 108; ++i) std::printf(" %6lld", t[wg][i][7] - t[0][100][7]);
        std::printf(wg == 0 ? "\n     " : "\n");
      }
    }
  }
  if (what == "prefill-b64") {  // not part of "all": the prefill shapes through 64-key blocks
    Problem s1(2, 200, 300, 4, 2, true, 5, 128, 64), s2(1, 70, 70, 4, 4, false, 6, 128, 64);
    Problem s3(2, 600, 700, 32, 8, true, 9, 128, 64), s4(3, 130, 130, 32, 8, false, 10, 128, 64);
    Problem b1(4, 4096, 4096, 32, 32, false, 7, 128, 64), b2(4, 4096, 4096, 32, 32, true, 8, 128, 64);
    std::printf("lab prefill-b64: TFLOP/s at 4 x 32 heads x 4096, d 128, non-causal and causal (block 64)\n");
    ok &= run_versions("prefill-b64", kPrefillVersions, only, {&s1, &s2, &s3, &s4}, {&b1, &b2}, prefill_tflops,
                       "TFLOP/s");
  }
  if (what == "prefill-same" || what == "prefill64-same") {  // not part of "all": two versions' bits
    // Clusters of two against one CTA per item: each query block computes
    // the same tiles in the same order either way, so the outputs should
    // agree bit for bit, causal or not; the launcher
    // can then pick clusters by shape without a request's result depending
    // on what else is in its batch. Exact variants are checked the same way.
    // prefill64-same A B: a pair of head dim 64 versions (no default pairs).
    const bool d64 = what == "prefill64-same";
    const auto& versions = d64 ? kPrefill64Versions : kPrefillVersions;
    const int d = d64 ? 64 : 128;
    std::printf("lab %s: two versions on the same inputs, d %d, bytes of the output that differ\n", what.c_str(), d);
    auto named = [&](const char* prefix) -> const Version& {
      for (const Version& v : versions)
        if (std::strncmp(v.name, prefix, std::strlen(prefix)) == 0) return v;
      std::fprintf(stderr, "no version %s\n", prefix);
      std::exit(1);
    };
    // The order items are handed out in (v51, v52) changes nothing either.
    // prefill-same A B: only that pair (name prefixes).
    std::vector<std::pair<const char*, const char*>> pairs = {
        {"v40 ", "v42 "}, {"v45 ", "v46 "}, {"v46 ", "v51 "}, {"v45 ", "v52 "},
        {"v54 ", "v73 "}, {"v53 ", "v74 "}, {"v73 ", "v83 "}, {"v73 ", "v85 "}, {"v74 ", "v87 "}};
    if (d64 && argc < 4) {
      std::fprintf(stderr, "usage: attention_lab prefill64-same VERSION_A VERSION_B (name prefixes)\n");
      return 2;
    }
    if (argc >= 4) pairs = {{argv[2], argv[3]}};
    for (const auto& [one_name, two_name] : pairs) {
      const Version& one = named(one_name);
      const Version& two = named(two_name);
      for (const bool causal : {false, true}) {
        Problem a(2, 200, 300, 4, 2, causal, 5, d), b(3, 600, 700, 32, 8, causal, 9, d),
            c(3, 130, 130, 32, 8, causal, 10, d), e(4, 4096, 4096, 32, 32, causal, 7, d),
            g(1, 16384, 16384, 32, 32, causal, 13, d), f(5, 1, 900, 32, 8, causal, 15, d);
        for (Problem* pr : {&a, &b, &c, &e, &g, &f}) {
          std::vector<bf16> x(pr->q.size()), y(pr->q.size());
          for (auto [version, dst] : {std::pair{&one, &x}, std::pair{&two, &y}}) {
            CK(cudaMemset(pr->dout, 0xff, pr->q.size() * sizeof(bf16)));
            version->make(*pr)();
            CK(cudaDeviceSynchronize());
            CK(cudaMemcpy(dst->data(), pr->dout, dst->size() * sizeof(bf16), cudaMemcpyDeviceToHost));
          }
          int64_t differ = 0;
          for (size_t i = 0; i < x.size(); ++i) differ += std::memcmp(&x[i], &y[i], sizeof(bf16)) != 0;
          std::printf("  %s/ %s %d x %d (context %d), causal %d: %lld of %zu differ\n", one_name, two_name,
                      pr->n_seqs, pr->q_len, pr->ctx, int(causal), static_cast<long long>(differ), x.size());
          ok = ok && differ == 0;
        }
      }
    }
  }
  if (what == "prefill-ab" || what == "prefill64-ab") {  // not part of "all": two versions in turns over the sweep
    // prefill-ab A B: the versions named by A and B (name prefixes, e.g.
    // "v46 " "v51 ") take turns on each shape, five rounds, so both meet the
    // same clocks; each shape's median TFLOP/s and their ratio.
    const bool d64 = what == "prefill64-ab";
    const auto& versions = d64 ? kPrefill64Versions : kPrefillVersions;
    if (argc < 4) {
      std::fprintf(stderr, "usage: attention_lab %s VERSION_A VERSION_B (name prefixes)\n", what.c_str());
      return 2;
    }
    auto named = [&](const char* prefix) -> const Version& {
      for (const Version& v : versions)
        if (std::strncmp(v.name, prefix, std::strlen(prefix)) == 0) return v;
      std::fprintf(stderr, "no version %s\n", prefix);
      std::exit(1);
    };
    const Version& a = named(argv[2]);
    const Version& b = named(argv[3]);
    const int d = d64 ? 64 : 128;
    std::printf("lab %s: '%s' against '%s', d %d, TFLOP/s (medians of 5 rounds in turns)\n", what.c_str(), a.name,
                b.name, d);
    for (const bool causal : {false, true}) {
      // s5: 16 heads x 9 query blocks leave items for a last round (split without a mask).
      Problem s1(2, 200, 300, 4, 2, causal, 5, d), s3(2, 600, 700, 32, 8, causal, 9, d),
          s5(1, 1100, 1100, 16, 4, causal, 31, d);
      for (const Version* v : {&a, &b}) {
        double err = 0;
        for (Problem* pr : {&s1, &s3, &s5}) {
          CK(cudaMemset(pr->dout, 0xff, pr->q.size() * sizeof(bf16)));
          v->make(*pr)();
          CK(cudaDeviceSynchronize());
          err = std::max(err, pr->max_error(7));
        }
        ok = ok && err < 2e-2;
        std::printf("  %s causal %d: max err %.2e %s\n", v->name, int(causal), err, err < 2e-2 ? "ok" : "WRONG");
      }
    }
    for (const auto& [seqs, len] : {std::pair{16, 512}, std::pair{16, 1024}, std::pair{8, 2048}, std::pair{4, 4096},
                                    std::pair{1, 4096}, std::pair{2, 8192}, std::pair{1, 16384}}) {
      for (const bool causal : {false, true}) {
        Problem pr(seqs, len, len, 32, 32, causal, 21, d);
        auto run_a = a.make(pr), run_b = b.make(pr);
        std::vector<double> ra, rb;
        for (int round = 0; round < 5; ++round) {
          ra.push_back(prefill_tflops(pr, median_ms(run_a, 10)));
          rb.push_back(prefill_tflops(pr, median_ms(run_b, 10)));
        }
        std::sort(ra.begin(), ra.end());
        std::sort(rb.begin(), rb.end());
        std::printf("  %2d x %-5d causal %d: %7.1f  %7.1f TFLOP/s  x%.3f\n", seqs, len, int(causal), ra[2], rb[2],
                    rb[2] / ra[2]);
      }
    }
  }
  if (what == "prefill16k") {  // not part of "all": one long sequence (few, long items)
    Problem s1(2, 200, 300, 4, 2, true, 5), s2(1, 70, 70, 4, 4, false, 6);
    Problem b1(1, 16384, 16384, 32, 32, false, 13), b2(1, 16384, 16384, 32, 32, true, 14);
    std::printf("lab prefill16k: TFLOP/s at 1 x 32 heads x 16384, d 128, non-causal and causal (block 16)\n");
    ok &= run_versions("prefill16k", kPrefillVersions, only, {&s1, &s2}, {&b1, &b2}, prefill_tflops, "TFLOP/s");
  }
  if (what == "prefill-items") {  // not part of "all": where a version's time per item goes
    // Each item (128 query rows of one head) runs n key tiles; the same items
    // with twice the keys (a cached prefix as long as the query) give the
    // cost of a tile, and the rest of an item's time in tiles.
    std::printf("lab prefill-items: non-causal, 32 heads, d 128: ms at 1x and 2x the keys, and each item's cost\n"
                "beyond its tiles, in tiles\n");
    for (const auto& [seqs, len] : {std::pair{16, 1024}, std::pair{4, 4096}}) {
      Problem one(seqs, len, len, 32, 32, false, 11), two(seqs, len, 2 * len, 32, 32, false, 12);
      for (size_t i = 0; i < kPrefillVersions.size(); ++i) {
        if (!only.has(int(i) + 1)) continue;
        const float t1 = median_ms(kPrefillVersions[i].make(one)), t2 = median_ms(kPrefillVersions[i].make(two));
        const double tiles = len / 128.0, per_tile = (t2 - t1) / tiles;
        std::printf("  %5d x %-5d %-58s %8.3f %8.3f ms  item overhead %.2f tiles\n", seqs, len,
                    kPrefillVersions[i].name, t1, t2, t1 / per_tile - tiles);
      }
    }
  }
  if (what == "all" || what == "prefill64") {
    Problem s1(2, 200, 300, 4, 2, true, 5, 64), s2(1, 70, 70, 4, 4, false, 6, 64);
    Problem s3(2, 600, 700, 32, 8, true, 9, 64), s4(3, 130, 130, 32, 8, false, 10, 64);
    Problem b1(4, 4096, 4096, 32, 32, false, 7, 64), b2(4, 4096, 4096, 32, 32, true, 8, 64);
    std::printf("lab prefill64: TFLOP/s at 4 x 32 heads x 4096, d 64, non-causal and causal (block 16)\n");
    ok &= run_versions("prefill64", kPrefill64Versions, only, {&s1, &s2, &s3, &s4}, {&b1, &b2}, prefill_tflops,
                       "TFLOP/s");
  }
  return ok ? 0 : 1;
}
