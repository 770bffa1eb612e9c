// Lab for exact_rows_attention (src/kernels/cuda/exact_rows*.cu): the rows
// of each of its paths against the Hopper prefill
// kernel's, bit for bit, and their time against the split-KV decode kernel and
// the prefill kernel on the same decode rows.
//
// Validation:
// random paged pools (blocks shuffled), random queries; decode
// rows (one token per sequence) and short queries (2-5 tokens, as verifies),
// contexts from 1 to 5,000 keys, head dims 64 (9 heads over 3) and 128 (32
// over 8); every output element compared bit for bit with the prefill
// kernel's, outputs poisoned (NaN) first.
// Timing: a decode step's attention over every layer's pools (so the KV comes
// from memory, not L2), batch 1 to 128 at 640 keys and 1 to 32 at 4,096, the
// heads of Llama-3-8B and of SmolLM2; median of 20 graph replays.
//
//   exact_rows_lab
#include <cuda_bf16.h>
#include <cuda_runtime.h>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/exact_rows_split.cuh"
#include "kernels/cuda/layer_ops.h"
#include "lab_common.h"

namespace kc = exactly::kernels::cuda;

namespace {

constexpr int kBlock = 16;
int64_t g_split_differ = 0;  // elements in which the split path alone differs, over all cases

// The split path's chain (exact_rows_split.cuh) in the lab's modes: 4, the
// lone chain with its ring of 4 tiles; -1, -2, -4, a ring of 8 tiles fed by
// 1, 2 or 4 producer warps (production's choices); 0, the lone chain
// without copies (wrong bits; timed only, as the chain's floor).
constexpr int kSplitModes[] = {4, -1, -2, -4};
template <int D>
void launch_split(int mode, const kc::ExactRowsParams& p, const kc::exact_split::SplitArrays& a, int n_seqs,
                  int max_seq_len, cudaStream_t st) {
  namespace es = kc::exact_split;
  switch (mode) {
    case 4: return es::launch<D, 4, 0>(p, a, n_seqs, max_seq_len, st);
    case -1: return es::launch<D, es::kProducerStages, 1>(p, a, n_seqs, max_seq_len, st);
    case -2: return es::launch<D, es::kProducerStages, 2>(p, a, n_seqs, max_seq_len, st);
    case -4: return es::launch<D, es::kProducerStages, 4>(p, a, n_seqs, max_seq_len, st);
    default: return es::launch<D, 4, 0, false>(p, a, n_seqs, max_seq_len, st);
  }
}
int64_t split_bytes_for(int n_seqs, int n_kv, int group, int max_q, int max_seq_len) {
  namespace es = kc::exact_split;
  return es::SplitLayout(n_seqs, n_kv, es::SplitShape(group, max_q, max_seq_len)).bytes();
}
void run_split(int mode, const kc::PagedKVDevice& cache, const kc::AttentionBatchDevice& batch, const void* q,
               int n_heads, float scale, void* out, void* ws, int64_t, cudaStream_t st) {
  namespace es = kc::exact_split;
  const kc::ExactRowsParams p = kc::paged_attention_params<__nv_bfloat16>(cache, batch, q, out, n_heads, scale);
  const es::SplitShape shape(p.group, batch.max_query_len, batch.max_seq_len);
  const es::SplitArrays a = es::split_arrays(ws, es::SplitLayout(batch.n_seqs, p.n_kv_heads, shape), shape);
  kc::with_head_dim(cache.head_dim, [&](auto d) {
    launch_split<decltype(d)::value>(mode, p, a, batch.n_seqs, batch.max_seq_len, st);
  });
}

struct Batch {
  std::vector<int32_t> query_start, seq_lens, tables;
  int max_blocks = 0, max_q = 0, max_len = 0;
  int64_t tokens() const { return query_start.back(); }
};

Batch make_batch(const std::vector<int>& lens, const std::vector<int>& q_lens, int64_t pool_blocks, std::mt19937& rng) {
  Batch b;
  b.query_start.push_back(0);
  for (size_t i = 0; i < lens.size(); ++i) {
    b.seq_lens.push_back(lens[i]);
    b.query_start.push_back(b.query_start.back() + q_lens[i]);
    b.max_blocks = std::max(b.max_blocks, (lens[i] + kBlock - 1) / kBlock);
    b.max_q = std::max(b.max_q, q_lens[i]);
    b.max_len = std::max(b.max_len, lens[i]);
  }
  std::vector<int32_t> perm(static_cast<size_t>(pool_blocks));
  std::iota(perm.begin(), perm.end(), 0);
  std::shuffle(perm.begin(), perm.end(), rng);
  size_t next = 0;
  for (int len : lens)
    for (int j = 0; j < b.max_blocks; ++j)
      b.tables.push_back(j < (len + kBlock - 1) / kBlock ? perm[next++ % perm.size()] : 0);
  return b;
}

template <class T>
T* upload(const std::vector<T>& v) {
  T* p;
  CK(cudaMalloc(&p, v.size() * sizeof(T)));
  CK(cudaMemcpy(p, v.data(), v.size() * sizeof(T), cudaMemcpyHostToDevice));
  return p;
}

struct DeviceBatch {
  kc::AttentionBatchDevice view{};
  std::vector<void*> owned;
  explicit DeviceBatch(const Batch& b) {
    auto* qs = upload(b.query_start);
    auto* sl = upload(b.seq_lens);
    auto* bt = upload(b.tables);
    owned = {qs, sl, bt};
    view = {static_cast<int32_t>(b.seq_lens.size()), qs, sl, bt, b.max_blocks, b.max_q, b.max_len, b.tokens()};
  }
  ~DeviceBatch() {
    for (void* p : owned) cudaFree(p);
  }
};

// Returns the number of output elements that differ between the kernels.
int64_t compare(int head_dim, int n_heads, int n_kv, const std::vector<int>& lens, const std::vector<int>& q_lens,
                uint32_t seed) {
  std::mt19937 rng(seed);
  int64_t blocks = 0;
  for (int len : lens) blocks += (len + kBlock - 1) / kBlock;
  blocks += 8;
  const Batch b = make_batch(lens, q_lens, blocks, rng);
  DeviceBatch db(b);
  const int64_t pool = blocks * kBlock * n_kv * head_dim, q_elems = b.tokens() * n_heads * head_dim;
  void *k, *v, *q, *out_prefill, *out_exact, *out_windows, *out_cluster, *out_split, *split_ws;
  CK(cudaMalloc(&k, pool * 2));
  CK(cudaMalloc(&v, pool * 2));
  CK(cudaMalloc(&q, q_elems * 2));
  CK(cudaMalloc(&out_prefill, q_elems * 2));
  CK(cudaMalloc(&out_exact, q_elems * 2));
  CK(cudaMalloc(&out_windows, q_elems * 2));
  CK(cudaMalloc(&out_cluster, q_elems * 2));
  CK(cudaMalloc(&out_split, q_elems * 2));
  const int64_t split_bytes = split_bytes_for(static_cast<int>(lens.size()), n_kv, n_heads / n_kv, b.max_q,
                                                         b.max_len);
  CK(cudaMalloc(&split_ws, static_cast<size_t>(split_bytes)));
  CK(cudaMemset(split_ws, 0xff, static_cast<size_t>(split_bytes)));
  kc::fill_uniform_bf16(k, pool, 1.0f, seed * 3 + 1, nullptr);
  kc::fill_uniform_bf16(v, pool, 1.0f, seed * 3 + 2, nullptr);
  kc::fill_uniform_bf16(q, q_elems, 1.0f, seed * 3 + 3, nullptr);
  CK(cudaMemset(out_prefill, 0xff, q_elems * 2));
  CK(cudaMemset(out_exact, 0xff, q_elems * 2));
  CK(cudaMemset(out_windows, 0xff, q_elems * 2));
  CK(cudaMemset(out_cluster, 0xff, q_elems * 2));
  CK(cudaMemset(out_split, 0xff, q_elems * 2));
  const kc::PagedKVDevice cache{k, v, blocks, kBlock, n_kv, head_dim, kc::DType::bf16};
  const float scale = 1.0f / std::sqrt(static_cast<float>(head_dim));
  kc::flash_attention_prefill(cache, db.view, q, n_heads, scale, true, out_prefill, nullptr);
  kc::exact_rows_attention(cache, db.view, q, n_heads, scale, out_exact, nullptr, kc::ExactRowsPath::kOneKernel);
  kc::exact_rows_attention(cache, db.view, q, n_heads, scale, out_windows, nullptr, kc::ExactRowsPath::kWindows);
  kc::exact_rows_attention(cache, db.view, q, n_heads, scale, out_cluster, nullptr, kc::ExactRowsPath::kCluster);
  CK(cudaGetLastError());
  CK(cudaDeviceSynchronize());
  std::vector<uint16_t> a(static_cast<size_t>(q_elems)), x(static_cast<size_t>(q_elems)),
      y(static_cast<size_t>(q_elems)), z(static_cast<size_t>(q_elems)), u(static_cast<size_t>(q_elems));
  CK(cudaMemcpy(a.data(), out_prefill, a.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(x.data(), out_exact, x.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(y.data(), out_windows, y.size() * 2, cudaMemcpyDeviceToHost));
  CK(cudaMemcpy(z.data(), out_cluster, z.size() * 2, cudaMemcpyDeviceToHost));
  auto is_nan = [](uint16_t e) { return (e & 0x7f80) == 0x7f80 && (e & 0x7f) != 0; };
  int64_t diff = 0, nan = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    diff += (a[i] != x[i]) + (a[i] != y[i]) + (a[i] != z[i]);
    nan += is_nan(x[i]) + is_nan(y[i]) + is_nan(z[i]);
  }
  for (int stages : kSplitModes) {
    CK(cudaMemset(out_split, 0xff, q_elems * 2));
    run_split(stages, cache, db.view, q, n_heads, scale, out_split, split_ws, split_bytes, nullptr);
    CK(cudaGetLastError());
    CK(cudaDeviceSynchronize());
    CK(cudaMemcpy(u.data(), out_split, u.size() * 2, cudaMemcpyDeviceToHost));
    for (size_t i = 0; i < a.size(); ++i) {
      diff += a[i] != u[i];
      nan += is_nan(u[i]);
      g_split_differ += a[i] != u[i];
    }
  }
  for (void* p : {k, v, q, out_prefill, out_exact, out_windows, out_cluster, out_split, split_ws}) cudaFree(p);
  return diff + nan;
}

struct Shape {
  const char* name;
  int heads, kv, hd, layers;
};
constexpr Shape kLlama8B{"Llama-3-8B", 32, 8, 128, 32}, kSmolLM2{"SmolLM2-135M", 9, 3, 64, 30};

void time_decode(const Shape& shape, int batch, int ctx) {
  const int kHeads = shape.heads, kKv = shape.kv, kHd = shape.hd, kLayers = shape.layers;
  std::mt19937 rng(99);
  const std::vector<int> lens(static_cast<size_t>(batch), ctx), q_lens(static_cast<size_t>(batch), 1);
  const int64_t blocks = int64_t{batch} * ((ctx + kBlock - 1) / kBlock) + 8;
  const Batch b = make_batch(lens, q_lens, blocks, rng);
  DeviceBatch db(b);
  const int64_t pool = blocks * kBlock * kKv * kHd, q_elems = int64_t{batch} * kHeads * kHd;
  std::vector<kc::PagedKVDevice> caches;
  for (int l = 0; l < kLayers; ++l) {
    void *k, *v;
    CK(cudaMalloc(&k, pool * 2));
    CK(cudaMalloc(&v, pool * 2));
    kc::fill_uniform_bf16(k, pool, 1.0f, 10 + l, nullptr);
    kc::fill_uniform_bf16(v, pool, 1.0f, 100 + l, nullptr);
    caches.push_back({k, v, blocks, kBlock, kKv, kHd, kc::DType::bf16});
  }
  void *q, *out, *ws;
  CK(cudaMalloc(&q, q_elems * 2));
  CK(cudaMalloc(&out, q_elems * 2));
  kc::fill_uniform_bf16(q, q_elems, 1.0f, 7, nullptr);
  const int64_t ws_bytes = kc::decode_workspace_bytes(batch, kHeads, ctx, kHd);
  CK(cudaMalloc(&ws, static_cast<size_t>(std::max<int64_t>(ws_bytes, 16))));
  CK(cudaDeviceSynchronize());
  const float scale = 1.0f / std::sqrt(static_cast<float>(kHd));
  const float split = time_graph([&](cudaStream_t st) {
    for (const auto& c : caches) kc::paged_decode_attention(c, db.view, q, kHeads, scale, out, ws, ws_bytes, st);
  });
  const float exact = time_graph([&](cudaStream_t st) {
    for (const auto& c : caches)
      kc::exact_rows_attention(c, db.view, q, kHeads, scale, out, st, kc::ExactRowsPath::kOneKernel);
  });
  const float windows = time_graph([&](cudaStream_t st) {
    for (const auto& c : caches) kc::exact_rows_attention(c, db.view, q, kHeads, scale, out, st, kc::ExactRowsPath::kWindows);
  });
  const float cluster = time_graph([&](cudaStream_t st) {
    for (const auto& c : caches) kc::exact_rows_attention(c, db.view, q, kHeads, scale, out, st, kc::ExactRowsPath::kCluster);
  });
  const int64_t split_bytes = split_bytes_for(batch, kKv, kHeads / kKv, 1, ctx);
  void* split_ws;
  CK(cudaMalloc(&split_ws, static_cast<size_t>(split_bytes)));
  float split_at[5];
  for (int i = 0; i < 5; ++i)
    split_at[i] = time_graph([&](cudaStream_t st) {
      for (const auto& c : caches) run_split(i < 4 ? kSplitModes[i] : 0, c, db.view, q, kHeads, scale, out, split_ws, split_bytes, st);
    });
  const float split_rows = split_at[0];
  cudaFree(split_ws);
  const float prefill = time_graph([&](cudaStream_t st) {
    for (const auto& c : caches) kc::flash_attention_prefill(c, db.view, q, kHeads, scale, true, out, st);
  });
  const double bytes = double(batch) * ctx * kKv * kHd * 2 * 2 * kLayers;
  std::printf("%s, batch %3d x %5d keys, %d layers: split-KV decode %7.3f ms (%4.0f GB/s) | exact rows, one kernel "
              "%7.3f ms (x%.2f) | exact rows, windows %7.3f ms (%4.0f GB/s, x%.2f) | cluster %7.3f ms (x%.2f) | split %7.3f ms "
              "(x%.2f), producers 1 %7.3f, 2 %7.3f, 4 %7.3f, chain without copies %7.3f | prefill kernel %7.3f ms (x%.2f)\n",
              shape.name, batch, ctx, kLayers, split, bytes / split / 1e6, exact, split / exact, windows, bytes / windows / 1e6,
              split / windows, cluster, split / cluster, split_rows, split / split_rows, split_at[1], split_at[2], split_at[3], split_at[4], prefill,
              split / prefill);
  for (auto& c : caches) cudaFree(c.k), cudaFree(c.v);
  cudaFree(q), cudaFree(out), cudaFree(ws);
}

}  // namespace

int main(int argc, char** argv) {
  int64_t bad = 0;
  int cases = 0;
  const std::vector<int> contexts = {1, 2, 15, 16, 17, 127, 128, 129, 255, 300, 640, 1000, 2049, 5000};
  for (int hd : {64, 128}) {
    const int n_heads = hd == 64 ? 9 : 32, n_kv = hd == 64 ? 3 : 8;
    // Decode rows: every context in one batch, and each alone.
    std::vector<int> ones(contexts.size(), 1);
    const int64_t d = compare(hd, n_heads, n_kv, contexts, ones, 1000u + hd);
    std::printf("head dim %3d: decode rows, %zu contexts in one batch: %lld elements differ\n", hd, contexts.size(),
                static_cast<long long>(d));
    bad += d, ++cases;
    for (int ctx : contexts) {
      const int64_t di = compare(hd, n_heads, n_kv, {ctx}, {1}, 2000u + ctx);
      if (di) std::printf("head dim %3d: decode row, context %d alone: %lld elements differ\n", hd, ctx,
                          static_cast<long long>(di));
      bad += di, ++cases;
    }
    // Short queries (verifies of 1-4 drafts) over various contexts.
    for (int ql : {2, 3, 5}) {
      std::vector<int> lens, qls;
      for (int ctx : contexts)
        if (ctx >= ql) lens.push_back(ctx), qls.push_back(ql);
      const int64_t dq = compare(hd, n_heads, n_kv, lens, qls, 3000u + hd + ql);
      std::printf("head dim %3d: queries of %d tokens, %zu contexts: %lld elements differ\n", hd, ql, lens.size(),
                  static_cast<long long>(dq));
      bad += dq, ++cases;
    }
  }
  std::printf(bad == 0 ? "exact rows (one kernel, windows, cluster, split): all %d cases bit-identical to the prefill kernel\n"
                       : "EXACT ROWS DIFFER from the prefill kernel (%d cases)\n",
              cases);
  std::printf("of which the split path: %lld elements\n", static_cast<long long>(g_split_differ));
  if (argc > 1 && std::strcmp(argv[1], "split-bounds") == 0) {  // where the split path starts to win, by keys and groups
    for (auto [batch, ctx] : {std::pair{1, 1024}, {1, 1536}, {1, 2048}, {1, 3072}, {4, 1024}, {4, 1536}, {4, 2048},
                              {4, 3072}, {6, 2048}, {6, 4096}, {8, 2048}})
      time_decode(kLlama8B, batch, ctx);
    for (auto [batch, ctx] : {std::pair{1, 1024}, {1, 1536}, {1, 2048}, {16, 1024}, {16, 2048}, {21, 4096}})
      time_decode(kSmolLM2, batch, ctx);
    return bad == 0 ? 0 : 1;
  }
  for (auto [batch, ctx] : {std::pair{1, 640}, {2, 640}, {4, 640}, {8, 640}, {16, 640}, {32, 640}, {64, 640},
                            {128, 640}, {1, 4096}, {4, 4096}, {8, 4096}, {16, 4096}, {32, 4096}})
    time_decode(kLlama8B, batch, ctx);
  for (auto [batch, ctx] : {std::pair{1, 640}, {4, 640}, {16, 640}, {64, 640}, {128, 640}, {1, 4096}, {16, 4096}})
    time_decode(kSmolLM2, batch, ctx);
  return bad == 0 ? 0 : 1;
}
