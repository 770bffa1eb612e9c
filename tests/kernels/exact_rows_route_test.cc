// Which kernel exact_rows_attention runs (kernels/cuda/exact_rows_route.h),
// checked on the host at the shapes the lab measured: an H100's facts (132
// SMs, three split chain CTAs an SM) and the models' groups and head dims.
#include "kernels/cuda/exact_rows_route.h"

#include <gtest/gtest.h>

namespace exactly::kernels::cuda {
namespace {

constexpr ExactRowsDevice kH100{true, 132, 3 * 132};
constexpr ExactRowsDevice kAmpere{false, 108, 6 * 108};

// One window of 256 keys a cluster CTA, at most 8 (exact_rows_cluster_size).
int cluster_ctas(int keys) { return keys <= 256 ? 1 : keys >= 8 * 256 ? 8 : (keys + 255) / 256; }

// Llama-3-8B: 8 KV heads, 4 query heads each (one 16-row group a KV head);
// SmolLM2: 3 KV heads, 3 each.
ExactRowsShape llama(int seqs, int keys, bool workspace = true) {
  return {int64_t{seqs} * 8, 128, keys, cluster_ctas(keys), workspace};
}
ExactRowsShape smollm2(int seqs, int keys, bool workspace = true) {
  return {int64_t{seqs} * 3, 64, keys, cluster_ctas(keys), workspace};
}

ExactRowsKernel route(const ExactRowsShape& s, const ExactRowsDevice& d = kH100) {
  return exact_rows_route(ExactRowsPath::kAuto, s, d);
}

TEST(ExactRowsRoute, LongContextsOfFewGroupsSplitOnHopper) {
  EXPECT_EQ(route(llama(1, 4096)), ExactRowsKernel::kSplit);
  EXPECT_EQ(route(llama(1, 1024)), ExactRowsKernel::kSplit);
  EXPECT_EQ(route(llama(4, 2048)), ExactRowsKernel::kSplit);
  EXPECT_EQ(route(llama(6, 4096)), ExactRowsKernel::kSplit);  // 48 groups, 384 chain CTAs of 396
  EXPECT_EQ(route(smollm2(1, 1024)), ExactRowsKernel::kSplit);
  EXPECT_EQ(route(smollm2(21, 4096)), ExactRowsKernel::kSplit);  // 63 groups, 252 chain CTAs
}

TEST(ExactRowsRoute, ShortContextsKeepTheClusterOrTheWindows) {
  EXPECT_EQ(route(llama(1, 1023)), ExactRowsKernel::kCluster);
  EXPECT_EQ(route(llama(1, 640)), ExactRowsKernel::kCluster);
  EXPECT_EQ(route(llama(4, 640)), ExactRowsKernel::kCluster);     // 32 groups x 3 CTAs
  EXPECT_EQ(route(llama(8, 640)), ExactRowsKernel::kWindows);     // 64 x 3 CTAs: past the SMs
  EXPECT_EQ(route(llama(1, 200)), ExactRowsKernel::kWindows);     // one window: no cluster
  EXPECT_EQ(route(smollm2(16, 200)), ExactRowsKernel::kWindows);  // below the split's 512 keys
}

TEST(ExactRowsRoute, ShortContextsSplitWhereTheClustersDoNotFit) {
  EXPECT_EQ(route(smollm2(16, 640)), ExactRowsKernel::kSplit);  // 48 groups x 3 CTAs; 192 chain CTAs
  EXPECT_EQ(route(smollm2(1, 640)), ExactRowsKernel::kCluster);
  EXPECT_EQ(route(llama(6, 640)), ExactRowsKernel::kSplit);  // 48 x 3 CTAs; 384 chain CTAs of 396
  EXPECT_EQ(route(smollm2(16, 640, false)), ExactRowsKernel::kWindows);
  EXPECT_EQ(route(smollm2(16, 640), kAmpere), ExactRowsKernel::kWindows);
}

TEST(ExactRowsRoute, TheSplitChainMustRunAtOnce) {
  EXPECT_EQ(route(llama(8, 2048)), ExactRowsKernel::kWindows);  // 512 chain CTAs of 396
  EXPECT_EQ(route(llama(8, 4096)), ExactRowsKernel::kWindows);
  EXPECT_EQ(route(smollm2(21, 4096)), ExactRowsKernel::kSplit);
  ExactRowsDevice small = kH100;
  small.split_chain_slots = 7;
  EXPECT_NE(route(llama(1, 4096), small), ExactRowsKernel::kSplit);  // 8 chain CTAs
}

TEST(ExactRowsRoute, TheSplitPathNeedsItsWorkspaceAndItsLimits) {
  EXPECT_EQ(route(llama(1, 4096, false)), ExactRowsKernel::kCluster);
  EXPECT_EQ(route(llama(4, 4096, false)), ExactRowsKernel::kPrefillKernel);  // 32 groups past 1,024 keys
  EXPECT_EQ(route(llama(1, kExactSplitMaxKeys)), ExactRowsKernel::kSplit);
  EXPECT_EQ(route(llama(1, kExactSplitMaxKeys + 1)), ExactRowsKernel::kCluster);
  EXPECT_EQ(route(smollm2(22, 4096)), ExactRowsKernel::kWindows);  // 66 groups
}

TEST(ExactRowsRoute, WithoutHopperNeitherSplitNorCluster) {
  EXPECT_EQ(route(llama(1, 4096), kAmpere), ExactRowsKernel::kPrefillKernel);
  EXPECT_EQ(route(llama(1, 640), kAmpere), ExactRowsKernel::kWindows);
  EXPECT_EQ(route(smollm2(1, 4096), kAmpere), ExactRowsKernel::kWindows);
  EXPECT_EQ(route(llama(32, 640), kAmpere), ExactRowsKernel::kOneKernel);  // 256 groups
}

TEST(ExactRowsRoute, AForcedPathIsTakenWhereItCanRun) {
  const ExactRowsShape s = llama(1, 4096);
  EXPECT_EQ(exact_rows_route(ExactRowsPath::kWindows, s, kH100), ExactRowsKernel::kWindows);
  EXPECT_EQ(exact_rows_route(ExactRowsPath::kCluster, s, kAmpere), ExactRowsKernel::kCluster);
  EXPECT_EQ(exact_rows_route(ExactRowsPath::kOneKernel, s, kH100), ExactRowsKernel::kOneKernel);
  EXPECT_EQ(exact_rows_route(ExactRowsPath::kSplit, llama(64, 640), kAmpere), ExactRowsKernel::kOneKernel);
  EXPECT_EQ(exact_rows_route(ExactRowsPath::kSplit, llama(8, 200), kAmpere), ExactRowsKernel::kSplit);
  EXPECT_EQ(exact_rows_route(ExactRowsPath::kSplit, llama(1, 4096, false), kH100), ExactRowsKernel::kOneKernel);
}

}  // namespace
}  // namespace exactly::kernels::cuda
