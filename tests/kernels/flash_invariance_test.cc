// Bitwise batch invariance of FlashAttention: a query row's output does not
// depend on the prefill chunk it came in (one 1300-token chunk, chunks of 7,
// 64 or 512, or one decode step per token through split-KV), on the other
// sequences in the batch, or on the thread count. Also: the scratch memory of
// a prefill does not grow with the prompt.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "random_weights.h"

namespace exactly::kernels {
namespace {

struct Shape {
  int group, head_dim, block_size;
};

// One pool of KV blocks; each sequence reads it through its own shuffled table.
struct Pool {
  int n_kv_heads = 3, head_dim, block_size, max_blocks;
  std::vector<float> k, v;  // [num_blocks, block_size, n_kv_heads, head_dim]

  Pool(std::mt19937& rng, const Shape& s, int max_len)
      : head_dim(s.head_dim), block_size(s.block_size), max_blocks((max_len + s.block_size - 1) / s.block_size) {
    k = testing::random_floats(rng, int64_t{max_blocks} * block_size * n_kv_heads * head_dim);
    v = testing::random_floats(rng, static_cast<int64_t>(k.size()));
  }
  PagedKV cache() { return {k.data(), v.data(), max_blocks, block_size, n_kv_heads, head_dim}; }
  std::vector<int32_t> table(std::mt19937& rng) const {
    std::vector<int32_t> t(static_cast<size_t>(max_blocks));
    std::iota(t.begin(), t.end(), 0);
    std::shuffle(t.begin(), t.end(), rng);
    return t;
  }
};

class FlashInvariance : public ::testing::TestWithParam<Shape> {};

TEST_P(FlashInvariance, RowBitsIndependentOfChunkBatchAndThreads) {
  const Shape shape = GetParam();
  const int len = 1300;  // three 512-key partitions
  std::mt19937 rng(static_cast<uint32_t>(shape.group * 100 + shape.head_dim + shape.block_size));
  Pool pool(rng, shape, 2100);
  const PagedKV cache = pool.cache();
  const int n_heads = 3 * shape.group;
  const int64_t row = int64_t{n_heads} * shape.head_dim;
  const std::vector<int32_t> table = pool.table(rng), other_table = pool.table(rng);
  const std::vector<float> q = testing::random_floats(rng, len * row, -3.0f, 3.0f);
  const float scale = 1.0f / std::sqrt(static_cast<float>(shape.head_dim));
  ThreadPool one(1), two(2);

  // Rows [first, first + n) of the sequence as one chunk whose context ends at first + n.
  auto run_chunk = [&](int first, int n, ThreadPool& threads, float* out) {
    const int32_t qs[2] = {0, n}, seq_len = first + n;
    const AttentionBatch b{1, qs, &seq_len, table.data(), pool.max_blocks};
    attention(cache, b, q.data() + first * row, n_heads, scale, out + first * row, threads);
  };
  std::vector<float> whole(q.size());
  run_chunk(0, len, one, whole.data());

  auto expect_same = [&](const std::vector<float>& got, const char* how) {
    for (int t = 0; t < len; ++t)
      ASSERT_EQ(std::memcmp(got.data() + t * row, whole.data() + t * row, row * sizeof(float)), 0)
          << how << ": token " << t << " differs from the single 1300-token chunk";
  };
  for (ThreadPool* threads : {&one, &two}) {
    for (int chunk : {1, 7, 64, 512, len}) {  // chunk 1 = one decode step per token (split-KV past 512 keys)
      std::vector<float> out(q.size());
      for (int first = 0; first < len; first += chunk) run_chunk(first, std::min(chunk, len - first), *threads, out.data());
      expect_same(out, ("chunks of " + std::to_string(chunk) + ", threads " + std::to_string(threads->size())).c_str());
    }
  }

  // The last 300 tokens (1000 cached) inside a batch: a decode at context 2100
  // before them and a 50-token prompt after them, on two threads.
  const std::vector<float> q_other = testing::random_floats(rng, 51 * row);
  std::vector<float> q_batch(q_other.begin(), q_other.begin() + row);
  q_batch.insert(q_batch.end(), q.begin() + 1000 * row, q.end());
  q_batch.insert(q_batch.end(), q_other.begin() + row, q_other.end());
  const int32_t qs[4] = {0, 1, 301, 351}, seq_lens[3] = {2100, len, 50};
  std::vector<int32_t> tables = other_table;
  tables.insert(tables.end(), table.begin(), table.end());
  tables.insert(tables.end(), other_table.begin(), other_table.end());
  const AttentionBatch b{3, qs, seq_lens, tables.data(), pool.max_blocks};
  std::vector<float> out(q_batch.size());
  attention(cache, b, q_batch.data(), n_heads, scale, out.data(), two);
  EXPECT_EQ(std::memcmp(out.data() + row, whole.data() + 1000 * row, 300 * row * sizeof(float)), 0)
      << "the 300 tokens differ inside a batch";
}

INSTANTIATE_TEST_SUITE_P(Shapes, FlashInvariance,
                         ::testing::Values(Shape{3, 64, 16}, Shape{1, 64, 32}, Shape{8, 128, 32}),
                         [](const auto& p) {
                           return "group" + std::to_string(p.param.group) + "_d" + std::to_string(p.param.head_dim) +
                                  "_block" + std::to_string(p.param.block_size);
                         });

TEST(FlashScratch, PrefillScratchDoesNotGrowWithThePrompt) {
  const int n_blocks = 8192 / 16;
  std::vector<int32_t> table(n_blocks);
  std::iota(table.begin(), table.end(), 0);
  const PagedKV cache{nullptr, nullptr, n_blocks, 16, 3, 64};
  auto bytes = [&](int n_new, int len, int threads) {
    const int32_t qs[2] = {0, n_new};
    const AttentionBatch b{1, qs, &len, table.data(), n_blocks};
    return attention_scratch_bytes(cache, b, 9, threads);
  };
  for (int threads : {1, 2}) {
    const int64_t short_prompt = bytes(512, 512, threads), long_prompt = bytes(8192, 8192, threads);
    EXPECT_EQ(long_prompt, short_prompt) << threads << " threads";
    EXPECT_LE(long_prompt, threads * 96 * 1024) << threads << " threads";  // a few tiles, not a score matrix
    EXPECT_EQ(bytes(8192, 8192, threads), bytes(4000, 8192, threads));     // a chunk after a cached prefix
  }
  // A decode step at context 8192 adds one partial state (m, l, 64 outputs)
  // per 512-key partition, KV head and query head of the group.
  EXPECT_EQ(bytes(1, 8192, 1) - bytes(512, 512, 1), int64_t{16} * 3 * 3 * (64 + 2) * 4);
}

}  // namespace
}  // namespace exactly::kernels
