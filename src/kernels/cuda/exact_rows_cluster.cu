// exact_rows_attention's cluster path: the windowed path's bits with a row
// group's windows spread over the CTAs of a thread-block cluster.
//
// In the prefill kernel's chain only O, the row sums and the running maximum
// carry from one 256-key window to the next. So CTA c of a cluster of C takes
// windows c, c + C, c + 2C, ...: it copies their K and V and computes their
// scores in parallel with the other CTAs, then waits for the chain's state
// after the window before its own (O, the row sums and the maximum, 8.5 KB
// at head dim 128, stored into its shared memory by the previous CTA with
// st.async and counted on its barrier), computes the window's probabilities
// from that maximum, adds its tiles to O in the windowed path's order, and
// passes the state on to the CTA of the next window. The CTA of the last
// window writes the rows. A batch of few row groups then reads its keys
// through C SMs instead of one, and only the chain's steps and one hop per
// window stay sequential.
#include <cuda_bf16.h>

#include <algorithm>
#include <cmath>

#include "kernels/cuda/cuda_check.h"
#include "kernels/cuda/device_info.h"
#include "kernels/cuda/exact_rows_window.cuh"
#include "kernels/cuda/exact_rows_window.h"
#include "kernels/cuda/launch_common.h"
#include "kernels/cuda/tma_primitives.cuh"

namespace exactly::kernels::cuda {
namespace {

using namespace exact_windows;

constexpr int kMaxClusterCtas = 8;  // the portable cluster size

// The windowed layout, then the chain's state as it arrives: O in the
// probabilities' space (free between a window's chain and the next window's
// probabilities, see the kernel), each lane's row sums and maxima, and the
// barrier the state's bytes land on.
template <int D>
struct ClusterLayout {
  using W = WindowLayout<D>;
  static constexpr int kChainWarps = D / kChainCols;
  static constexpr int kInboxO = W::kProbs;                // [chain warp][lane] 2 x float4
  static constexpr int kInboxRows = (W::kBytes + 15) / 16 * 16;  // [lane] float4: l0, l1, max0, max1
  static constexpr int kBarrier = kInboxRows + 32 * 16;
  static constexpr int kBytes = kBarrier + 16;
  static constexpr uint32_t kStateBytes = kChainWarps * 32 * 32 + 32 * 16;
  static_assert(kChainWarps * 32 * 32 <= kWindowTiles * kFragmentBytes, "O fits where the probabilities go");
};

// The chain's state after a window into CTA `rank`'s shared memory: every
// chain warp its columns of O, warp 0 each lane's row sums and maxima.
template <int D>
__device__ __forceinline__ void send_state(uint32_t local_base, uint32_t rank, const float (&o)[2][4],
                                           const OnlineSoftmax<kBN>& sm, const float (&before)[2]) {
  using C = ClusterLayout<D>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const uint32_t remote = cluster_address(local_base, rank);
  const uint32_t bar = remote + C::kBarrier;
  const uint32_t slot = remote + C::kInboxO + (warp * 32 + lane) * 32;
  auto bits = [](float x) { return __float_as_int(x); };
  st_async_v4(slot, bits(o[0][0]), bits(o[0][1]), bits(o[0][2]), bits(o[0][3]), bar);
  st_async_v4(slot + 16, bits(o[1][0]), bits(o[1][1]), bits(o[1][2]), bits(o[1][3]), bar);
  if (warp == 0)
    st_async_v4(remote + C::kInboxRows + lane * 16, bits(sm.l_run[0]), bits(sm.l_run[1]), bits(before[0]),
                bits(before[1]), bar);
}

// The state sent above, out of this CTA's shared memory.
template <int D>
__device__ __forceinline__ void receive_state(const uint8_t* shared, float (&o)[2][4], OnlineSoftmax<kBN>& sm,
                                              float (&before)[2]) {
  using C = ClusterLayout<D>;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  const float4 rows = reinterpret_cast<const float4*>(shared + C::kInboxRows)[lane];
  sm.l_run[0] = rows.x, sm.l_run[1] = rows.y, before[0] = rows.z, before[1] = rows.w;
  if (warp >= C::kChainWarps) return;
  const float4* slot = reinterpret_cast<const float4*>(shared + C::kInboxO) + (warp * 32 + lane) * 2;
  const float4 a = slot[0], b = slot[1];
  o[0][0] = a.x, o[0][1] = a.y, o[0][2] = a.z, o[0][3] = a.w;
  o[1][0] = b.x, o[1][1] = b.y, o[1][2] = b.z, o[1][3] = b.w;
}

template <int D>
__global__ void __launch_bounds__(kThreads, 1) exact_cluster_kernel(const ExactRowsParams p, int cluster) {
  release_dependents();  // the output product may start streaming its weights
#if defined(__CUDA_ARCH__) && __CUDA_ARCH__ >= 900  // clusters are Hopper's
  using L = WindowLayout<D>;
  using C = ClusterLayout<D>;
  extern __shared__ __align__(128) uint8_t shared[];
  const uint32_t base = smem_address(shared), bar = base + C::kBarrier;
  const int rank = static_cast<int>(cluster_rank()), s = blockIdx.x / cluster, kv_head = blockIdx.y;
  const int warp = threadIdx.x / 32, lane = threadIdx.x % 32;
  if (threadIdx.x == 0) {
    mbarrier_init(bar, 1);
    mbarrier_init_fence();
  }
  cluster_sync_all();  // no CTA stores into another before its barrier is set up
  const RowGroup rg(p, s, blockIdx.z);
  if (rg.empty()) return;
  const int ctx_len = rg.ctx_len, n_windows = (ctx_len + kWindowKeys - 1) / kWindowKeys;
  const int own = rank < n_windows ? (n_windows - rank + cluster - 1) / cluster : 0;
  float o[2][4] = {};
  OnlineSoftmax<kBN> sm;
  if (own == 0) {  // no keys at all: rank 0 writes the rows (zeros), as the prefill kernel does
    if (rank == 0 && n_windows == 0 && warp < C::kChainWarps) write_rows<D>(p, rg, kv_head, sm, o, kChainCols * warp);
    return;
  }
  const int here = min(16, rg.rows - rg.row0);
  float* scores = reinterpret_cast<float*>(shared + L::kScores);
  float* row_max = reinterpret_cast<float*>(shared + L::kMax);
  const WindowCopies<D> copies{p,        p.block_tables + int64_t{s} * p.max_blocks_per_seq,
                               reinterpret_cast<int32_t*>(shared + L::kSlots),
                               base,
                               ctx_len,  n_windows,
                               kv_head,  static_cast<int>(threadIdx.x),
                               rank,     cluster};
  // cp.async groups as in the windowed path, by the CTA's own windows j.
  copies.store_slot(0, copies.block_entry(0));
  copies.store_slot(1, copies.block_entry(1));
  __syncthreads();
  copies.issue(0, false);
  copies.issue(1, false);
  copies.issue(0, true);
  cp_async_commit();
  uint32_t qf[D / 16][4];
  load_q_fragments<D>(qf, p, rg, kv_head, lane);
  const int pos[2] = {rg.position(p, lane / 4), rg.position(p, lane / 4 + 8)};

  float before[2] = {-INFINITY, -INFINITY};
  for (int j = 0; j < own; ++j) {
    const int window = copies.window(j), key0 = window * kWindowKeys;
    const int32_t next_entry = copies.block_entry(j + 2);
    cp_async_wait<3>();
    __syncthreads();
    score_window<D>(qf, copies.keys(j), key0, ctx_len, pos, scores, row_max);
    copies.store_slot(j + 2, next_entry);
    __syncthreads();
    copies.issue(j + 2, false);
    if (window > 0) {  // the state after the previous window, from its CTA
      if (threadIdx.x == 0) mbarrier_arrive_expect_tx(bar, C::kStateBytes);
      mbarrier_wait_cluster(bar, static_cast<uint32_t>((rank == 0 ? j - 1 : j) & 1));
      receive_state<D>(shared, o, sm, before);
      __syncthreads();  // the state is read before the probabilities overwrite it
    }
    const int tiles = min(kWindowTiles, (ctx_len - key0 + kBN - 1) / kBN);
    if (warp < tiles)
      tile_probabilities(warp, before, scores, row_max, here, p.scale_log2,
                         reinterpret_cast<uint4*>(shared + L::kProbs + warp * kFragmentBytes),
                         reinterpret_cast<float4*>(shared + L::kChain) + warp * 32);
#pragma unroll
    for (int r = 0; r < 2; ++r)
      for (int w = 0; w < kWarps; ++w) before[r] = fmaxf(before[r], row_max[w * 16 + lane / 4 + 8 * r]);
    cp_async_wait<1>();
    __syncthreads();
    if (warp < C::kChainWarps) {
      chain_window<D>(tiles, shared, base + L::kV, sm, o);
      if (window + 1 < n_windows)
        send_state<D>(base, static_cast<uint32_t>((window + 1) % cluster), o, sm, before);
      else
        write_rows<D>(p, rg, kv_head, sm, o, kChainCols * warp);
    }
    __syncthreads();
    copies.issue(j + 1, true);
  }
  cp_async_wait<0>();
#else
  static_assert(ClusterLayout<D>::kInboxO >= 0 && ClusterLayout<D>::kStateBytes > 0);
  __trap();
#endif
}

template <int D>
void launch(const ExactRowsParams& p, int n_seqs, int row_groups, int cluster, cudaStream_t stream) {
  constexpr int kBytes = ClusterLayout<D>::kBytes;
  allow_shared_memory<exact_cluster_kernel<D>>(kBytes, "exact_rows_attention: cluster");
  cudaLaunchConfig_t config{};
  config.gridDim = dim3(static_cast<unsigned>(n_seqs * cluster), static_cast<unsigned>(p.n_kv_heads),
                        static_cast<unsigned>(row_groups));
  config.blockDim = dim3(kThreads);
  config.dynamicSmemBytes = kBytes;
  config.stream = stream;
  cudaLaunchAttribute attribute{};
  attribute.id = cudaLaunchAttributeClusterDimension;
  attribute.val.clusterDim.x = static_cast<unsigned>(cluster);
  attribute.val.clusterDim.y = 1;
  attribute.val.clusterDim.z = 1;
  config.attrs = &attribute;
  config.numAttrs = 1;
  check_cuda(cudaLaunchKernelEx(&config, exact_cluster_kernel<D>, p, cluster), "exact_rows_attention: cluster");
}

}  // namespace

bool exact_rows_cluster_runs() { return device_compute_major() == 9; }  // sm_90a machine code only

int exact_rows_cluster_size(int max_seq_len) {
  const int windows = (max_seq_len + kWindowKeys - 1) / kWindowKeys;
  return std::min(kMaxClusterCtas, std::max(1, windows));
}

void exact_rows_cluster(const ExactRowsParams& p, int n_seqs, int row_groups, int max_seq_len, int head_dim,
                        cudaStream_t stream) {
  if (!exact_rows_cluster_runs()) return exact_rows_windows(p, n_seqs, row_groups, head_dim, stream);  // same bits
  const int cluster = exact_rows_cluster_size(max_seq_len);
  with_head_dim(head_dim, [&](auto d) { launch<decltype(d)::value>(p, n_seqs, row_groups, cluster, stream); });
}

}  // namespace exactly::kernels::cuda
