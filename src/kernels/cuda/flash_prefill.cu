// Launcher of the FlashAttention prefill kernel: picks the tile shape for the
// head dimension, raises the shared-memory limit, sizes the grid from the
// host-known longest query.
#include <algorithm>
#include <climits>
#include <cstdlib>
#include <map>
#include <mutex>
#include <string>
#include <utility>

#include "kernels/cuda/attention.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/flash_prefill_kernel.cuh"
#include "kernels/cuda/flash_prefill_sm90_ws.cuh"
#include "kernels/cuda/launch_common.h"

namespace exactly::kernels::cuda {
namespace {

constexpr int kPrefillWarps = 4;  // x 16 * kPrefillMT query rows each
constexpr int kPrefillBN = 64;    // keys per tile
constexpr int kPrefillMT = 2;     // 16-row m-tiles per warp

template <typename T, int D>
void launch(const PagedKVDevice& c, const AttentionBatchDevice& b, const void* q, int n_heads, float scale,
            bool causal, void* out, cudaStream_t stream) {
  // Chosen in dev/cuda (attention_lab): see its notes for the alternatives.
  constexpr int kWarps = kPrefillWarps, kBN = kPrefillBN, kMT = kPrefillMT;
  using Shape = PrefillShape<D, kWarps, kBN, kMT>;
  constexpr auto kernel = flash_prefill_kernel<T, D, kWarps, kBN, kMT>;
  allow_shared_memory<kernel>(Shape::kSmemBytes, "flash_attention_prefill: shared memory limit");
  const PrefillParams p{paged_attention_params<void>(c, b, q, out, n_heads, scale), causal};
  const dim3 grid((b.max_query_len + Shape::kBM - 1) / Shape::kBM, n_heads, b.n_seqs);
  kernel<<<grid, Shape::kThreads, Shape::kSmemBytes, stream>>>(p);
  check_launch("flash_attention_prefill");
}

// Hopper, bf16: the warp-specialised kernel (a TMA producer warpgroup, two
// wgmma consumer warpgroups, three at head dim 64, 128-key tiles),
// persistent when there are more work items than SMs; dev/cuda/NOTES.md has
// the alternatives and their figures. Three stages at either head dim: at
// head dim 64 a stage is half the size, but a deeper ring runs no faster.
constexpr int kSm90BN = 128;
constexpr int kSm90Stages = 3;
constexpr int kSm90ClusterKeys = 4096;  // clusters of two above this context (launch_sm90)
constexpr int kSm90MaxConsumerWarps = 12;  // three consumer warpgroups at head dim 64

}  // namespace

// Production's features at head dim D, in clusters of CLUSTER CTAs. The
// producer copies each item's Q into shared memory, so that no global load
// stands between two items. Clusters of two share each K/V tile (multicast),
// which pays only for long items (flash_attention_prefill picks them by
// shape); a query block's output is the same bits either way, so a request's
// result does not depend on its batch.
// At head dim 128 a step tests its K and V barriers together, so that their
// answers' latencies overlap; the next item's first P is packed before the
// output is stored, which frees registers for the stores, and a row's quad
// stores 16 bytes a thread, a quarter of the store instructions. Without
// clusters a tile's K is released once its scores are done, which keeps the
// producer a K tile further ahead; in clusters that runs slower, and whole
// stages are released.
// At head dim 64 a tile's products take half as long against the same
// softmax, and none of those options pays. Three consumer warpgroups take
// 192-row query blocks, as FlashAttention-3 does: a third fewer K/V copies
// per FLOP, and more products under each softmax. Their 160 registers a
// thread leave no room for Q, so the scores read it from shared memory. The
// features are fixed per head dim and cluster size, never chosen by the batch.
// (Outside the anonymous namespace: the host and sm_80 passes, which compile
// no Hopper kernel, leave its members unused.)
template <int D, int CLUSTER>
struct Sm90Production : Sm90WsFeatures {
  static constexpr int kHeadDim = D;
  static constexpr int kTileKeys = kSm90BN;
  static constexpr int kStages = kSm90Stages;
  static constexpr int kCluster = CLUSTER;
  static constexpr int kConsumerWarpgroups = D == 64 ? 3 : 2;
  static constexpr bool kQByTma = true;
  static constexpr bool kQShared = D == 64;
  static constexpr bool kEarlyTests = D == 128;
  static constexpr bool kPackFirst = D == 128;
  static constexpr bool kQuadStores = D == 128;
  static constexpr bool kSplitRelease = D == 128 && CLUSTER == 1;
  static_assert(D == 128 || CLUSTER == 1, "head dim 64 runs no clusters");
};

namespace {

// Device memory kept for launches on `stream` (launches on one stream run in
// order, so one set per stream suffices), made by `make` on the first launch
// and living as long as the process. None (T{}) while the stream is being
// captured into a graph before its first plain launch, since allocating is
// not allowed then.
template <typename T, typename Make>
T per_stream(cudaStream_t stream, Make make) {
  static std::mutex mutex;
  static std::map<std::pair<int, cudaStream_t>, T> made;
  int device = 0;
  check_cuda(cudaGetDevice(&device), "cudaGetDevice");
  const std::lock_guard lock(mutex);
  const auto found = made.find({device, stream});
  if (found != made.end()) return found->second;
  cudaStreamCaptureStatus capture = cudaStreamCaptureStatusNone;
  check_cuda(cudaStreamIsCapturing(stream, &capture), "cudaStreamIsCapturing");
  if (capture != cudaStreamCaptureStatusNone) return T{};
  return made[{device, stream}] = make();
}

// The persistent kernel's counter (two ints, zero between launches). Without
// one, a launch runs one CTA per item.
int32_t* schedule_counter(cudaStream_t stream) {
  return per_stream<int32_t*>(stream, [stream] {
    int32_t* counter = nullptr;
    check_cuda(cudaMalloc(&counter, 2 * sizeof(int32_t)), "flash_attention_prefill: scheduler counter");
    check_cuda(cudaMemsetAsync(counter, 0, 2 * sizeof(int32_t), stream), "flash_attention_prefill: scheduler counter");
    return counter;
  });
}

// Where the pieces of split items (sm90_ws_split) leave their partial results:
// a slot per SM (pieces x CTAs per piece never exceed the SMs) and an arrival
// count per split item, CTA and consumer warp, zero between launches.
// Allocated by the first launch without a causal mask, which the engine
// never makes (a model's attention is causal), so an engine holds none;
// without it a launch splits nothing. 68 KB per SM (9.2 MB on 132).
struct SplitWorkspace {
  float* partials = nullptr;
  int32_t* arrivals = nullptr;
};
SplitWorkspace split_workspace(cudaStream_t stream, int sms) {
  return per_stream<SplitWorkspace>(stream, [stream, sms] {
    SplitWorkspace w;
    const size_t arrivals = static_cast<size_t>(sms) * kSm90MaxConsumerWarps * sizeof(int32_t);
    check_cuda(cudaMalloc(&w.partials, sms * Sm90WsPartial<128>::kBytesPerCta), "flash_attention_prefill: partials");
    check_cuda(cudaMalloc(&w.arrivals, arrivals), "flash_attention_prefill: arrival counts");
    check_cuda(cudaMemsetAsync(w.arrivals, 0, arrivals, stream), "flash_attention_prefill: arrival counts");
    return w;
  });
}

// A launch of the kernel with features F: a batch runs in clusters (F's
// kCluster 2) when its longest context exceeds kSm90ClusterKeys and some
// query is longer than one block (a batch of single blocks would leave each
// cluster's second CTA without rows).
template <class F>
void launch_sm90(const PagedKVDevice& c, const AttentionBatchDevice& b, const void* q, int n_heads, float scale,
                 bool causal, void* out, cudaStream_t stream) {
  constexpr int D = F::kHeadDim, CLUSTER = F::kCluster;
  constexpr bool QTMA = F::kQByTma;
  using Shape = Sm90WsShape<F>;
  static_assert(size_t{16} * Sm90WsPartial<D>::kChunks * Shape::kConsumerThreads <= Sm90WsPartial<128>::kBytesPerCta,
                "a CTA's partials fit its workspace slot");
  static_assert(Shape::kConsumerWarps <= kSm90MaxConsumerWarps, "arrival counts per query block");
  constexpr auto kernel = flash_prefill_sm90_ws_kernel<F>;
  allow_shared_memory<kernel>(Shape::kSmemBytes, "flash_attention_prefill: shared memory limit");
  // The maps describe the pools and the query buffer, not the batch: a few
  // microseconds of host work per call, no device memory.
  CUtensorMap k_map, v_map, q_map;
  const int64_t slots = c.num_blocks * c.block_size;
  EXACTLY_CUDA_REQUIRE(make_heads_tensor_map(&k_map, c.k, slots, c.n_kv_heads, c.head_dim, true) &&
                           make_heads_tensor_map(&v_map, c.v, slots, c.n_kv_heads, c.head_dim, true),
                       "flash_attention_prefill: the driver refused a tensor map of the KV pool");
  if constexpr (QTMA) {
    EXACTLY_CUDA_REQUIRE(make_heads_tensor_map(&q_map, const_cast<void*>(q), b.q_rows, n_heads, D, true, Shape::kBM),
                         "flash_attention_prefill: the driver refused a tensor map of q (%lld rows, %d heads)",
                         static_cast<long long>(b.q_rows), n_heads);
  } else {
    q_map = k_map;  // not read
  }
  const PrefillParams p{paged_attention_params<void>(c, b, q, out, n_heads, scale), causal};
  const int n_mblocks = (b.max_query_len + Shape::kBM - 1) / Shape::kBM;
  const int per_head = (n_mblocks + CLUSTER - 1) / CLUSTER;
  const int64_t n_seq_heads = int64_t{n_heads} * b.n_seqs;
  const int64_t n_items = per_head * n_seq_heads;
  const int sms = device_multiprocessors();
  // The schedule for `clusters` persistent clusters: causal items handed out
  // longest first at the end, unmasked ones split at the end.
  auto schedule = [&](int clusters) {
    Sm90WsSchedule sched{n_mblocks, 0, schedule_counter(stream),
                         sm90_ws_tail_heads(n_seq_heads, per_head, clusters, causal)};
    if (!causal && sched.counter != nullptr) {
      const SplitWorkspace w = split_workspace(stream, sms);
      sched.partials = w.partials;
      sched.arrivals = w.arrivals;
    }
    const int64_t indices =
        sm90_ws_split(sched, n_items, clusters, (b.max_seq_len + kSm90BN - 1) / kSm90BN, causal);
    EXACTLY_CUDA_REQUIRE(indices * CLUSTER <= INT32_MAX, "flash_attention_prefill: %lld work items",
                         static_cast<long long>(indices));
    sched.n_items = static_cast<int32_t>(indices);
    return sched;
  };
  if constexpr (CLUSTER == 1) {
    const Sm90WsSchedule sched = schedule(sms);
    const int64_t grid = sched.counter != nullptr ? std::min<int64_t>(sched.n_items, sms) : sched.n_items;
    kernel<<<static_cast<unsigned>(grid), Shape::kThreads, Shape::kSmemBytes, stream>>>(k_map, v_map, q_map, p,
                                                                                         sched);
  } else {
    static const int clusters = sm90_ws_max_clusters(kernel, CLUSTER, Shape::kSmemBytes);
    EXACTLY_CUDA_REQUIRE(clusters > 0, "flash_attention_prefill: no cluster of %d CTAs fits on this GPU", CLUSTER);
    const Sm90WsSchedule sched = schedule(clusters);
    const int64_t grid =
        (sched.counter != nullptr ? std::min<int64_t>(sched.n_items, clusters) : sched.n_items) * CLUSTER;
    check_cuda(sm90_ws_launch(kernel, static_cast<int>(grid), CLUSTER, Shape::kSmemBytes, stream, k_map, v_map, q_map,
                              p, sched),
               "flash_attention_prefill (sm90, clusters)");
  }
  check_launch("flash_attention_prefill (sm90)");
}

// The Hopper kernel exists only as sm_90a machine code; other GPUs take the
// mma.sync kernel. EXACTLY_PREFILL_KERNEL=mma forces the latter (for tests).
bool use_sm90(const PagedKVDevice& c) {
  static const bool hopper = [] {
    const char* force = std::getenv("EXACTLY_PREFILL_KERNEL");
    return device_compute_major() == 9 && !(force != nullptr && std::string(force) == "mma");
  }();
  return hopper && c.dtype == DType::bf16 && (c.head_dim == 64 || c.head_dim == 128);
}

}  // namespace

void flash_attention_prefill(const PagedKVDevice& cache, const AttentionBatchDevice& batch, const void* q,
                             int n_heads, float scale, bool causal, void* out, cudaStream_t stream) {
  check_attention_args(cache, batch, q, out, n_heads, "flash_attention_prefill");
  EXACTLY_CUDA_REQUIRE(n_heads <= 65535, "flash_attention_prefill: %d heads", n_heads);
  if (batch.n_seqs == 0 || batch.max_query_len <= 0) return;
  EXACTLY_CUDA_REQUIRE(batch.q_rows > 0, "flash_attention_prefill: q_rows %lld (the rows q holds)",
                       static_cast<long long>(batch.q_rows));
  if (use_sm90(cache)) {
    if (cache.head_dim == 64) {
      return launch_sm90<Sm90Production<64, 1>>(cache, batch, q, n_heads, scale, causal, out, stream);
    }
    return batch.max_query_len > Sm90WsShape<Sm90Production<128, 1>>::kBM && batch.max_seq_len > kSm90ClusterKeys
               ? launch_sm90<Sm90Production<128, 2>>(cache, batch, q, n_heads, scale, causal, out, stream)
               : launch_sm90<Sm90Production<128, 1>>(cache, batch, q, n_heads, scale, causal, out, stream);
  }
  with_head_dim(cache.head_dim, [&](auto d) {
    constexpr int D = decltype(d)::value;
    cache.dtype == DType::bf16 ? launch<__nv_bfloat16, D>(cache, batch, q, n_heads, scale, causal, out, stream)
                               : launch<__half, D>(cache, batch, q, n_heads, scale, causal, out, stream);
  });
}

}  // namespace exactly::kernels::cuda
