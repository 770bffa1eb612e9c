// Paged attention (FlashAttention prefill and split-KV decode) against a
// float64 softmax(q k^T * scale) v computed here, held to at most twice the
// error of a naive fp32 implementation (the reference) plus 1e-6; and bitwise
// batch and thread invariance. Shapes: context lengths 1, 15, 16, 17, 600,
// 1023, 4097 (several 512-key partitions) with and without cached prefixes,
// GQA ratios 1/3/8, head dims 64/128, block sizes 16/32, shuffled block tables.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <numeric>
#include <random>
#include <vector>

#include "kernels/ops.h"
#include "random_weights.h"

namespace exactly::kernels {
namespace {

struct SeqSpec {
  int32_t len;    // context length after this step
  int32_t n_new;  // query tokens in this step (the rest is a cached prefix)
};

struct AttentionCase {
  int n_heads = 0, n_kv_heads = 0, head_dim = 0, block_size = 0;
  std::vector<SeqSpec> seqs;
  // Built by setup():
  std::vector<float> k_cache, v_cache;  // [num_blocks, block_size, n_kv_heads, head_dim]
  std::vector<int32_t> query_start;     // [n_seqs + 1]
  std::vector<int32_t> seq_lens;        // [n_seqs]
  std::vector<int32_t> block_tables;    // [n_seqs, max_blocks]
  std::vector<float> q;                 // [n_tokens, n_heads, head_dim]
  int32_t max_blocks = 0;
  int64_t num_blocks = 0;

  int64_t n_tokens() const { return query_start.back(); }
  PagedKV cache() { return {k_cache.data(), v_cache.data(), num_blocks, block_size, n_kv_heads, head_dim}; }
  AttentionBatch batch() const {
    return {static_cast<int32_t>(seqs.size()), query_start.data(), seq_lens.data(), block_tables.data(), max_blocks};
  }

  void setup(std::mt19937& rng, float q_scale) {
    query_start = {0};
    for (const auto& s : seqs) {
      query_start.push_back(query_start.back() + s.n_new);
      seq_lens.push_back(s.len);
      max_blocks = std::max(max_blocks, (s.len + block_size - 1) / block_size);
    }
    num_blocks = int64_t{max_blocks} * static_cast<int64_t>(seqs.size()) + 5;  // spare blocks stay unused
    // Physical blocks handed out in a random order: tables are not contiguous.
    std::vector<int32_t> ids(static_cast<size_t>(num_blocks));
    std::iota(ids.begin(), ids.end(), 0);
    std::shuffle(ids.begin(), ids.end(), rng);
    block_tables.assign(seqs.size() * static_cast<size_t>(max_blocks), -1);
    for (size_t s = 0, next = 0; s < seqs.size(); ++s)
      for (int32_t b = 0; b < (seqs[s].len + block_size - 1) / block_size; ++b)
        block_tables[s * static_cast<size_t>(max_blocks) + static_cast<size_t>(b)] = ids[next++];
    const int64_t elems = num_blocks * block_size * n_kv_heads * head_dim;
    k_cache = testing::random_floats(rng, elems);
    v_cache = testing::random_floats(rng, elems);
    q = testing::random_floats(rng, n_tokens() * n_heads * head_dim, -q_scale, q_scale);
  }

  // float64 softmax(q k^T * scale) v for every query token and head.
  std::vector<double> exact(float scale, AttentionMask mask = AttentionMask::causal, int32_t window = 0,
                            const float* sinks = nullptr) {
    std::vector<double> out(q.size());
    const PagedKV c = cache();
    const int group = n_heads / n_kv_heads;
    for (size_t s = 0; s < seqs.size(); ++s)
      for (int32_t j = 0; j < seqs[s].n_new; ++j) {
        const int64_t t = query_start[s] + j;
        const int32_t pos = mask == AttentionMask::causal ? seqs[s].len - seqs[s].n_new + j : seqs[s].len - 1;
        const int32_t first = window > 0 ? std::max(0, pos - window + 1) : 0;
        for (int h = 0; h < n_heads; ++h) {
          std::vector<double> p(static_cast<size_t>(pos) + 1, 0.0);
          double mx = sinks != nullptr ? sinks[h] : -INFINITY, sum = 0;
          for (int32_t key = first; key <= pos; ++key) {
            double d = 0;
            for (int e = 0; e < head_dim; ++e)
              d += static_cast<double>(q[static_cast<size_t>((t * n_heads + h) * head_dim + e)]) *
                   c.k[offset(s, key, h / group) + e];
            p[static_cast<size_t>(key)] = d * scale;
            mx = std::max(mx, d * scale);
          }
          if (sinks != nullptr) sum += std::exp(sinks[h] - mx);  // a term of the sum with no value
          for (int32_t key = first; key <= pos; ++key) {
            double& x = p[static_cast<size_t>(key)];
            sum += (x = std::exp(x - mx));
          }
          for (int e = 0; e < head_dim; ++e) {
            double acc = 0;
            for (int32_t key = first; key <= pos; ++key)
              acc += p[static_cast<size_t>(key)] * c.v[offset(s, key, h / group) + e];
            out[static_cast<size_t>((t * n_heads + h) * head_dim + e)] = acc / sum;
          }
        }
      }
    return out;
  }

  int64_t offset(size_t s, int32_t key, int kv_head) const {
    const int32_t block = block_tables[s * static_cast<size_t>(max_blocks) + static_cast<size_t>(key / block_size)];
    return ((int64_t{block} * block_size + key % block_size) * n_kv_heads + kv_head) * head_dim;
  }
};

double max_error(const std::vector<float>& got, const std::vector<double>& exact, int64_t begin, int64_t end) {
  double e = 0;
  for (int64_t i = begin; i < end; ++i) e = std::max(e, std::fabs(got[static_cast<size_t>(i)] - exact[static_cast<size_t>(i)]));
  return e;
}

struct Config {
  int group, head_dim;
  float q_scale;
  int block_size;
};

class AttentionTest : public ::testing::TestWithParam<Config> {};

TEST_P(AttentionTest, MatchesFloat64AndIsBatchInvariant) {
  const Config cfg = GetParam();
  AttentionCase ac;
  ac.n_heads = 2 * cfg.group;
  ac.n_kv_heads = 2;
  ac.head_dim = cfg.head_dim;
  ac.block_size = cfg.block_size;
  ac.seqs = {{1, 1}, {15, 15}, {16, 16}, {16, 3}, {17, 17}, {17, 1}, {600, 3}, {1023, 300}, {4097, 40}, {4097, 1}};
  std::mt19937 rng(static_cast<uint32_t>(cfg.group * 1000 + cfg.head_dim));
  ac.setup(rng, cfg.q_scale);
  const float scale = 1.0f / std::sqrt(static_cast<float>(cfg.head_dim));
  const PagedKV cache = ac.cache();
  const AttentionBatch batch = ac.batch();

  ThreadPool two(2), one(1);
  std::vector<float> out(ac.q.size()), naive(ac.q.size());
  attention(cache, batch, ac.q.data(), ac.n_heads, scale, out.data(), two);
  reference::attention(cache, batch, ac.q.data(), ac.n_heads, scale, naive.data());
  const std::vector<double> exact = ac.exact(scale);

  const int64_t row = int64_t{ac.n_heads} * ac.head_dim;
  for (size_t s = 0; s < ac.seqs.size(); ++s) {
    const int64_t begin = ac.query_start[s] * row, end = ac.query_start[s + 1] * row;
    const double err = max_error(out, exact, begin, end);
    const double naive_err = max_error(naive, exact, begin, end);
    EXPECT_LE(err, 2 * naive_err + 1e-6) << "sequence " << s << " of length " << ac.seqs[s].len;

    // The same sequence alone in its own batch, on one thread and on two
    // (alone, a short chunk is cut into smaller query tiles to keep both
    // threads busy): identical bits.
    const std::vector<int32_t> qs{0, ac.seqs[s].n_new};
    const AttentionBatch alone_batch{1, qs.data(), &ac.seq_lens[s],
                                     ac.block_tables.data() + s * static_cast<size_t>(ac.max_blocks), ac.max_blocks};
    for (ThreadPool* pool : {&one, &two}) {
      std::vector<float> out_alone(static_cast<size_t>(end - begin));
      attention(cache, alone_batch, ac.q.data() + begin, ac.n_heads, scale, out_alone.data(), *pool);
      EXPECT_EQ(std::memcmp(out_alone.data(), out.data() + begin, out_alone.size() * sizeof(float)), 0)
          << "sequence " << s << " alone on " << pool->size() << " thread(s) differs from its outputs in the batch";
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Shapes, AttentionTest,
                         ::testing::Values(Config{1, 64, 1.0f, 16}, Config{3, 64, 1.0f, 16}, Config{8, 64, 1.0f, 32},
                                           Config{1, 128, 1.0f, 32}, Config{3, 128, 4.0f, 16},
                                           Config{8, 128, 4.0f, 32}),
                         [](const auto& p) {
                           return "group" + std::to_string(p.param.group) + "_d" + std::to_string(p.param.head_dim) +
                                  "_block" + std::to_string(p.param.block_size);
                         });

// Every query sees all of its sequence's keys (no causal mask).
TEST(AttentionNoMask, MatchesFloat64) {
  AttentionCase ac;
  ac.n_heads = 6;
  ac.n_kv_heads = 2;
  ac.head_dim = 64;
  ac.block_size = 16;
  ac.seqs = {{1, 1}, {17, 17}, {40, 5}, {1100, 20}};
  std::mt19937 rng(7);
  ac.setup(rng, 2.0f);
  const float scale = 0.125f;
  ThreadPool two(2);
  std::vector<float> out(ac.q.size()), naive(ac.q.size());
  attention(ac.cache(), ac.batch(), ac.q.data(), ac.n_heads, scale, out.data(), two, AttentionMask::none);
  reference::attention(ac.cache(), ac.batch(), ac.q.data(), ac.n_heads, scale, naive.data(), AttentionMask::none);
  const std::vector<double> exact = ac.exact(scale, AttentionMask::none);
  const std::vector<double> causal = ac.exact(scale);
  const int64_t row = int64_t{ac.n_heads} * ac.head_dim;
  for (size_t s = 0; s < ac.seqs.size(); ++s) {
    const int64_t begin = ac.query_start[s] * row, end = ac.query_start[s + 1] * row;
    EXPECT_LE(max_error(out, exact, begin, end), 2 * max_error(naive, exact, begin, end) + 1e-6) << "sequence " << s;
  }
  // The unmasked result is a different function: the test would notice a mask left on.
  EXPECT_GT(max_error(out, causal, ac.query_start[3] * row, ac.query_start[4] * row), 1e-3);
}

// Sliding windows (Gemma 3's local layers): a query at position p sees keys
// p - window + 1 .. p. Windows of one key, of a KV tile, inside one 512-key
// partition and across partitions; against float64 and the naive kernel,
// different from full causal attention, and with the same bits alone, in a
// batch, on one thread or two, and as one decode step (split-KV) after the
// same sequence's prefill.
TEST(AttentionSlidingWindow, MatchesFloat64AndKeepsItsBitsAcrossBatchesAndChunks) {
  for (const int32_t window : {1, 16, 100, 512, 700}) {
    AttentionCase ac;
    ac.n_heads = 6;
    ac.n_kv_heads = 2;
    ac.head_dim = 64;
    ac.block_size = 16;
    ac.seqs = {{1, 1}, {40, 40}, {700, 5}, {1300, 1300}, {2100, 1}};
    std::mt19937 rng(static_cast<uint32_t>(window));
    ac.setup(rng, 2.0f);
    const float scale = 0.125f;
    ThreadPool two(2), one(1);
    std::vector<float> out(ac.q.size()), naive(ac.q.size());
    attention(ac.cache(), ac.batch(), ac.q.data(), ac.n_heads, scale, out.data(), two, AttentionMask::causal, window);
    reference::attention(ac.cache(), ac.batch(), ac.q.data(), ac.n_heads, scale, naive.data(), AttentionMask::causal,
                         window);
    const std::vector<double> exact = ac.exact(scale, AttentionMask::causal, window);
    const int64_t row = int64_t{ac.n_heads} * ac.head_dim;
    for (size_t s = 0; s < ac.seqs.size(); ++s) {
      const int64_t begin = ac.query_start[s] * row, end = ac.query_start[s + 1] * row;
      EXPECT_LE(max_error(out, exact, begin, end), 2 * max_error(naive, exact, begin, end) + 1e-6)
          << "window " << window << ", sequence " << s;
      const std::vector<int32_t> qs{0, ac.seqs[s].n_new};
      const AttentionBatch alone{1, qs.data(), &ac.seq_lens[s],
                                 ac.block_tables.data() + s * static_cast<size_t>(ac.max_blocks), ac.max_blocks};
      std::vector<float> out_alone(static_cast<size_t>(end - begin));
      attention(ac.cache(), alone, ac.q.data() + begin, ac.n_heads, scale, out_alone.data(), one,
                AttentionMask::causal, window);
      EXPECT_EQ(std::memcmp(out_alone.data(), out.data() + begin, out_alone.size() * sizeof(float)), 0)
          << "window " << window << ": sequence " << s << " alone differs from its rows in the batch";
    }
    // The prefill's last row of the 1300-token sequence, again as a decode step.
    const int32_t len = 1300;
    const std::vector<int32_t> qs{0, 1};
    const AttentionBatch decode{1, qs.data(), &len, ac.block_tables.data() + 3 * static_cast<size_t>(ac.max_blocks),
                                ac.max_blocks};
    const int64_t last = (ac.query_start[4] - 1) * row;
    std::vector<float> step(static_cast<size_t>(row));
    attention(ac.cache(), decode, ac.q.data() + last, ac.n_heads, scale, step.data(), two, AttentionMask::causal,
              window);
    EXPECT_EQ(std::memcmp(step.data(), out.data() + last, step.size() * sizeof(float)), 0) << "window " << window;
    // A window shorter than the context computes something else than full attention.
    const std::vector<double> full = ac.exact(scale);
    EXPECT_GT(max_error(out, full, ac.query_start[3] * row, ac.query_start[4] * row), 1e-3) << "window " << window;
  }
}

// Blocks that lie wholly before the window of a sequence's first query may be
// released by the KV cache (their table entries kNoBlock) and reused by other
// sequences: the kernel must read neither their keys nor their values, also
// where a 16-key tile starts in such a block (blocks of 4 and 6 keys). Those
// entries point here at a block of NaNs, which any read would spread.
TEST(AttentionSlidingWindow, ReadsNoBlockBeforeTheWindowOfTheFirstQuery) {
  for (const int block_size : {4, 6}) {
    AttentionCase ac;
    ac.n_heads = 4;
    ac.n_kv_heads = 2;
    ac.head_dim = 64;
    ac.block_size = block_size;
    ac.seqs = {{37, 1}, {50, 7}, {29, 29}, {600, 3}, {1100, 40}};
    std::mt19937 rng(static_cast<uint32_t>(block_size));
    ac.setup(rng, 2.0f);
    const int32_t window = 10;
    const float scale = 0.125f;
    ThreadPool two(2);
    std::vector<float> full(ac.q.size()), released(ac.q.size());
    attention(ac.cache(), ac.batch(), ac.q.data(), ac.n_heads, scale, full.data(), two, AttentionMask::causal, window);

    const int64_t block_floats = int64_t{block_size} * ac.n_kv_heads * ac.head_dim;
    ac.k_cache.resize(ac.k_cache.size() + static_cast<size_t>(block_floats), NAN);
    ac.v_cache.resize(ac.v_cache.size() + static_cast<size_t>(block_floats), NAN);
    const auto nan_block = static_cast<int32_t>(ac.num_blocks++);
    int64_t num_released = 0;
    for (size_t s = 0; s < ac.seqs.size(); ++s) {
      const int32_t first_read = std::max(0, ac.seqs[s].len - ac.seqs[s].n_new - window + 1);
      for (int32_t b = 0; (b + 1) * block_size <= first_read; ++b, ++num_released)
        ac.block_tables[s * static_cast<size_t>(ac.max_blocks) + static_cast<size_t>(b)] = nan_block;
    }
    ASSERT_GT(num_released, 0);
    attention(ac.cache(), ac.batch(), ac.q.data(), ac.n_heads, scale, released.data(), two, AttentionMask::causal,
              window);
    EXPECT_EQ(std::memcmp(released.data(), full.data(), full.size() * sizeof(float)), 0) << "blocks of " << block_size;
  }
}

// Attention sinks (gpt-oss): a learned logit per query head joins every
// row's softmax denominator. Sinks below, near and far above the scores, with
// and without a sliding window: against float64 (and no worse than the naive
// kernel), different from attention without sinks, and with the same bits
// alone, in a batch and as a split-KV decode step after the prefill.
TEST(AttentionSinks, MatchFloat64AndKeepTheirBitsAcrossBatchesAndChunks) {
  for (const int32_t window : {0, 100}) {
    AttentionCase ac;
    ac.n_heads = 4;
    ac.n_kv_heads = 2;
    ac.head_dim = 64;
    ac.block_size = 16;
    ac.seqs = {{1, 1}, {40, 40}, {1300, 1300}, {1300, 1}};
    std::mt19937 rng(static_cast<uint32_t>(7 + window));
    ac.setup(rng, 2.0f);
    const std::vector<float> sinks{-30.0f, 0.0f, 2.5f, 40.0f};  // one head all but drowned by its sink
    const float scale = 0.125f;
    ThreadPool two(2), one(1);
    std::vector<float> out(ac.q.size()), naive(ac.q.size()), plain(ac.q.size());
    attention(ac.cache(), ac.batch(), ac.q.data(), ac.n_heads, scale, out.data(), two, AttentionMask::causal, window,
              sinks.data());
    attention(ac.cache(), ac.batch(), ac.q.data(), ac.n_heads, scale, plain.data(), two, AttentionMask::causal,
              window);
    reference::attention(ac.cache(), ac.batch(), ac.q.data(), ac.n_heads, scale, naive.data(), AttentionMask::causal,
                         window, sinks.data());
    const std::vector<double> exact = ac.exact(scale, AttentionMask::causal, window, sinks.data());
    const int64_t row = int64_t{ac.n_heads} * ac.head_dim;
    for (size_t s = 0; s < ac.seqs.size(); ++s) {
      const int64_t begin = ac.query_start[s] * row, end = ac.query_start[s + 1] * row;
      EXPECT_LE(max_error(out, exact, begin, end), 2 * max_error(naive, exact, begin, end) + 1e-6)
          << "window " << window << ", sequence " << s;
      EXPECT_GT(max_error(plain, exact, begin, end), 1e-3) << "sinks make no difference in sequence " << s;
      const std::vector<int32_t> qs{0, ac.seqs[s].n_new};
      const AttentionBatch alone{1, qs.data(), &ac.seq_lens[s],
                                 ac.block_tables.data() + s * static_cast<size_t>(ac.max_blocks), ac.max_blocks};
      std::vector<float> out_alone(static_cast<size_t>(end - begin));
      attention(ac.cache(), alone, ac.q.data() + begin, ac.n_heads, scale, out_alone.data(), one,
                AttentionMask::causal, window, sinks.data());
      EXPECT_EQ(std::memcmp(out_alone.data(), out.data() + begin, out_alone.size() * sizeof(float)), 0)
          << "window " << window << ": sequence " << s << " alone differs from its rows in the batch";
    }
    // Sequence 3 is sequence 2's last row as a decode step over 1,300 keys
    // (split-KV), if it reads the same keys: give it sequence 2's blocks.
    const std::vector<int32_t> qs{0, 1};
    const AttentionBatch decode{1, qs.data(), &ac.seq_lens[2],
                                ac.block_tables.data() + 2 * static_cast<size_t>(ac.max_blocks), ac.max_blocks};
    const int64_t last = (ac.query_start[3] - 1) * row;
    std::vector<float> step(static_cast<size_t>(row));
    attention(ac.cache(), decode, ac.q.data() + last, ac.n_heads, scale, step.data(), two, AttentionMask::causal,
              window, sinks.data());
    EXPECT_EQ(std::memcmp(step.data(), out.data() + last, step.size() * sizeof(float)), 0) << "window " << window;
  }
}

}  // namespace
}  // namespace exactly::kernels
