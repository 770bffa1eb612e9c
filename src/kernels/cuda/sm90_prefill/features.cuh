// The compile-time options of the Hopper prefill kernel
// (flash_prefill_sm90_ws.cuh), by name, and the shape of its shared memory
// that follows from them. A kernel instance takes one features struct:
// Sm90WsFeatures with some of its constants redefined (production's are in
// flash_prefill.cu).
#pragma once

namespace exactly::kernels::cuda {

struct Sm90WsFeatures {
  static constexpr int kHeadDim = 128;   // 64 or 128: one or two 64-column panels per K/V row
  static constexpr int kTileKeys = 128;  // keys per K/V tile, the score product's wgmma N (64 or 128)
  static constexpr int kStages = 3;      // K/V tiles in flight in the ring
  // Producer warps issuing copies: one thread issuing a tile's 32 copies (8
  // blocks of 16 keys x 2 panels x K and V, at head dim 128) in turn falls
  // behind the consumers; four share them.
  static constexpr int kIssuers = 4;
  static constexpr int kCopyKeys = 16;           // keys per bulk copy: divides the KV pool's block size
  static constexpr int kCluster = 1;             // CTAs per item (1 or 2), each K/V tile multicast to both
  static constexpr int kConsumerWarpgroups = 2;  // of 64 query rows each (2, or 3 at head dim 64)
  static constexpr bool kQByTma = false;         // the producer copies each item's Q into shared memory
  static constexpr bool kQShared = false;        // the scores read Q there (needs kQByTma): no Q registers
  static constexpr bool kEarlyTests = false;     // a step tests its K and V barriers together
  static constexpr bool kPackFirst = false;      // the next item's first P packed before the output is stored
  static constexpr bool kQuadStores = false;     // a row's quad transposes its words: 16-byte stores
  static constexpr bool kSplitRelease = false;   // a tile's K released after its scores, its V after P V
};

// Sizes and shared-memory bytes of a kernel with features F.
template <class F>
struct Sm90WsShape {
  static constexpr int kD = F::kHeadDim;
  static constexpr int kWG = F::kConsumerWarpgroups;
  static constexpr int kBM = 64 * kWG;
  static constexpr int kConsumerThreads = 128 * kWG;
  static constexpr int kConsumerWarps = 4 * kWG;
  static constexpr int kThreads = 128 + kConsumerThreads;
  static constexpr int kPanels = kD / 64;  // 64 bf16 columns = one 128-byte swizzled row
  static constexpr int kPanelBytes = F::kTileKeys * 128;
  static constexpr int kTileBytes = kPanels * kPanelBytes;
  // The item's Q, when the producer copies it in (kQByTma): kPanels panels
  // of kBM swizzled 128-byte rows.
  static constexpr int kQPanelBytes = kBM * 128;
  static constexpr int kQBytes = F::kQByTma ? kPanels * kQPanelBytes : 0;
  // two item slots (Sm90WsDesc); K full, V full, empty per stage; item full
  // and empty; Q full and empty; V's own empty per stage (kSplitRelease)
  static constexpr int kBarrierBytes = 2 * 64 + 3 * F::kStages * 8 + 2 * 2 * 8 + 2 * 8 + F::kStages * 8;
  static constexpr int kSmemBytes = 2 * F::kStages * kTileBytes + kQBytes + kBarrierBytes + 1024;
  static_assert(F::kTileKeys == 64 || F::kTileKeys == 128, "wgmma N of the score product");
  static_assert(kD == 64 || kD == 128, "wgmma N of the P V product");
  static_assert(kWG == 2 || kWG == 3, "consumer warpgroups");
  static_assert(!F::kQShared || F::kQByTma, "the scores read the Q that the producer copies in");
};

}  // namespace exactly::kernels::cuda
