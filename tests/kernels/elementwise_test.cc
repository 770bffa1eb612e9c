// rmsnorm, rope, silu_mul, add_inplace, embedding_lookup and kv_store against
// float64 or bitwise references.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "kernels/ops.h"
#include "random_weights.h"

namespace exactly::kernels {
namespace {

const double kU = std::ldexp(1.0, -24);  // fp32 unit roundoff

TEST(RmsNorm, MatchesFloat64AndReferenceBitwise) {
  std::mt19937 rng(3);
  for (int64_t dim : {1, 7, 64, 576, 1001}) {
    const int64_t n = 5;
    auto x = testing::random_floats(rng, n * dim, -3.0f, 3.0f);
    auto w = testing::random_floats(rng, dim, 0.5f, 2.0f);
    std::vector<float> out(x.size()), ref(x.size());
    rmsnorm(x.data(), w.data(), n, dim, 1e-5f, out.data());
    reference::rmsnorm(x.data(), w.data(), n, dim, 1e-5f, ref.data());
    ASSERT_EQ(std::memcmp(out.data(), ref.data(), out.size() * sizeof(float)), 0) << "dim " << dim;
    for (int64_t t = 0; t < n; ++t) {
      double ss = 0;
      for (int64_t i = 0; i < dim; ++i) ss += double{x[static_cast<size_t>(t * dim + i)]} * x[static_cast<size_t>(t * dim + i)];
      const double inv = 1.0 / std::sqrt(ss / static_cast<double>(dim) + 1e-5);
      for (int64_t i = 0; i < dim; ++i) {
        const size_t j = static_cast<size_t>(t * dim + i);
        const double exact = x[j] * inv * w[static_cast<size_t>(i)];
        // Three fp32 roundings (scale, x * scale, * w) on top of a float64 sum.
        ASSERT_LE(std::fabs(out[j] - exact), 3.01 * kU * std::fabs(exact) + 1e-30) << "dim " << dim << " i " << i;
      }
    }
  }
}

TEST(RmsNorm, InPlace) {
  std::mt19937 rng(4);
  auto x = testing::random_floats(rng, 3 * 576);
  auto w = testing::random_floats(rng, 576);
  std::vector<float> out(x.size());
  rmsnorm(x.data(), w.data(), 3, 576, 1e-6f, out.data());
  rmsnorm(x.data(), w.data(), 3, 576, 1e-6f, x.data());
  EXPECT_EQ(std::memcmp(out.data(), x.data(), out.size() * sizeof(float)), 0);
}

TEST(Rope, MatchesFloat64AndReferenceBitwise) {
  std::mt19937 rng(5);
  for (int rope_dims : {64, 32}) {
    for (float base : {10000.0f, 500000.0f}) {
      const int n_heads = 3, head_dim = 64;
      std::vector<int32_t> pos = {0, 1, 17, 4095, 100000};
      const int64_t n = static_cast<int64_t>(pos.size());
      auto x = testing::random_floats(rng, n * n_heads * head_dim);
      auto y = x, y_ref = x;
      rope_adjacent(y.data(), pos.data(), n, n_heads, head_dim, rope_dims, base);
      reference::rope_adjacent(y_ref.data(), pos.data(), n, n_heads, head_dim, rope_dims, base);
      ASSERT_EQ(std::memcmp(y.data(), y_ref.data(), y.size() * sizeof(float)), 0);
      for (int64_t t = 0; t < n; ++t)
        for (int h = 0; h < n_heads; ++h) {
          const size_t o = static_cast<size_t>((t * n_heads + h) * head_dim);
          for (int i = 0; i < head_dim / 2; ++i) {
            const double x0 = x[o + 2 * i], x1 = x[o + 2 * i + 1];
            double e0 = x0, e1 = x1;
            if (2 * i < rope_dims) {
              const double theta = pos[static_cast<size_t>(t)] * std::pow(double{base}, -2.0 * i / rope_dims);
              e0 = x0 * std::cos(theta) - x1 * std::sin(theta);
              e1 = x0 * std::sin(theta) + x1 * std::cos(theta);
            }
            // cos/sin rounded (u), two products (u), one sum (u).
            const double bound = 3.01 * kU * (std::fabs(x0) + std::fabs(x1));
            ASSERT_LE(std::fabs(y[o + 2 * i] - e0), bound) << "pos " << pos[static_cast<size_t>(t)] << " pair " << i;
            ASSERT_LE(std::fabs(y[o + 2 * i + 1] - e1), bound) << "pos " << pos[static_cast<size_t>(t)] << " pair " << i;
          }
        }
    }
  }
}

// The model computes each token's angles once per forward and rotates every
// layer's q and k with them: the same bits as rotating with fresh angles.
TEST(Rope, AngleTableGivesTheSameBits) {
  std::mt19937 rng(15);
  const int n_heads = 3, head_dim = 64, rope_dims = 64;
  std::vector<int32_t> pos = {0, 1, 17, 4095, 100000, 5};
  const int64_t n = static_cast<int64_t>(pos.size());
  auto x = testing::random_floats(rng, n * n_heads * head_dim);
  auto y = x, y_table = x;
  std::vector<float> c(static_cast<size_t>(n * rope_dims / 2)), s(c.size());
  rope_angles(pos.data(), n, rope_dims, 10000.0f, c.data(), s.data());
  rope_adjacent(y.data(), pos.data(), n, n_heads, head_dim, rope_dims, 10000.0f);
  rope_adjacent_with(y_table.data(), n, n_heads, head_dim, rope_dims, c.data(), s.data());
  EXPECT_EQ(std::memcmp(y.data(), y_table.data(), y.size() * sizeof(float)), 0);
}

// Split over threads, every element is computed alike: the same bits.
TEST(SiluMul, PooledGivesTheSameBits) {
  std::mt19937 rng(16);
  const int64_t n = 9 * 1536 + 7;
  auto g = testing::random_floats(rng, n, -20.0f, 20.0f);
  auto u = testing::random_floats(rng, n, -3.0f, 3.0f);
  std::vector<float> serial(static_cast<size_t>(n)), pooled = g;
  silu_mul(g.data(), u.data(), n, serial.data());
  ThreadPool two(2);
  silu_mul(pooled.data(), u.data(), n, pooled.data(), two);  // aliased, as the model calls it
  EXPECT_EQ(std::memcmp(serial.data(), pooled.data(), serial.size() * sizeof(float)), 0);
}

TEST(SiluMul, MatchesFloat64) {
  std::mt19937 rng(6);
  const int64_t n = 1537;
  auto g = testing::random_floats(rng, n, -20.0f, 20.0f);
  auto u = testing::random_floats(rng, n, -3.0f, 3.0f);
  std::vector<float> out(n), ref(n);
  silu_mul(g.data(), u.data(), n, out.data());
  reference::silu_mul(g.data(), u.data(), n, ref.data());
  for (int64_t i = 0; i < n; ++i) {
    const double gi = g[static_cast<size_t>(i)];
    const double exact = gi / (1.0 + std::exp(-gi)) * u[static_cast<size_t>(i)];
    // exp (a few ulp), 1 + e, the division and the product: well under 8 ulp.
    ASSERT_LE(std::fabs(out[static_cast<size_t>(i)] - exact), 8 * kU * std::fabs(exact) + 1e-37) << i;
    ASSERT_LE(std::fabs(ref[static_cast<size_t>(i)] - exact), kU * std::fabs(exact) + 1e-37) << i;
  }
  // out may alias gate.
  std::vector<float> g2 = g;
  silu_mul(g2.data(), u.data(), n, g2.data());
  EXPECT_EQ(std::memcmp(g2.data(), out.data(), out.size() * sizeof(float)), 0);
}

// GeGLU's gate: the tanh form of GELU through exp, to a bound that grows with
// the exponent's size: t = -2u carries a few ulp of |t| from its fp32
// products and constants, and an absolute error e in t is a relative error e
// in exp(t). (fp32's own 0.5 g (1 + tanh(u)) is far worse there: 1 + tanh(u)
// rounds to 0 once tanh(u) is within an ulp of -1.)
// the pooled, aliased and scalar-tail paths give the same bits.
TEST(GeluTanhMul, MatchesFloat64AndPoolsAlike) {
  std::mt19937 rng(8);
  const int64_t n = 9 * 1024 + 5;
  auto g = testing::random_floats(rng, n, -12.0f, 12.0f);
  auto u = testing::random_floats(rng, n, -3.0f, 3.0f);
  std::vector<float> out(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
  gelu_tanh_mul(g.data(), u.data(), n, out.data());
  reference::gelu_tanh_mul(g.data(), u.data(), n, ref.data());
  const double k = std::sqrt(2.0 / 3.14159265358979323846);
  for (int64_t i = 0; i < n; ++i) {
    const double gi = g[static_cast<size_t>(i)], t = 2 * k * (gi + 0.044715 * gi * gi * gi);
    // 0.5 g (1 + tanh(u)) = g / (1 + exp(-2u)); the second form keeps its
    // precision where tanh(u) is near -1, which even float64 would round away.
    const double exact = gi / (1.0 + std::exp(-t)) * u[static_cast<size_t>(i)];
    ASSERT_LE(std::fabs(out[static_cast<size_t>(i)] - exact), (8 + 16 * std::fabs(t)) * kU * std::fabs(exact) + 1e-37)
        << "gate " << gi;
    ASSERT_LE(std::fabs(ref[static_cast<size_t>(i)] - exact), kU * std::fabs(exact) + 1e-37) << i;
  }
  // A GELU is not a SiLU: the test tells them apart.
  std::vector<float> silu(static_cast<size_t>(n));
  silu_mul(g.data(), u.data(), n, silu.data());
  EXPECT_NE(std::memcmp(silu.data(), out.data(), out.size() * sizeof(float)), 0);
  ThreadPool two(2);
  std::vector<float> pooled = g;
  gelu_tanh_mul(pooled.data(), u.data(), n, pooled.data(), two);
  EXPECT_EQ(std::memcmp(pooled.data(), out.data(), out.size() * sizeof(float)), 0);
  for (int64_t i = 0; i < 8; ++i) {  // the scalar tail, one element at a time
    float one;
    gelu_tanh_mul(g.data() + i, u.data() + i, 1, &one);
    EXPECT_EQ(std::memcmp(&one, out.data() + i, sizeof one), 0) << i;
  }
}

// gpt-oss's clamped SwiGLU over gates and ups on both sides of the limit:
// against float64 within the exp's error (|alpha g| of at most 12 here), and
// distinguishable from plain SwiGLU (the clamps, the +1 and alpha all show);
// pooled, aliased and scalar-tail paths give the same bits.
TEST(ClampedSwigluMul, MatchesFloat64AndPoolsAlike) {
  constexpr float kAlpha = 1.702f, kLimit = 7.0f;
  std::mt19937 rng(9);
  const int64_t n = 9 * 1024 + 5;
  auto g = testing::random_floats(rng, n, -12.0f, 12.0f);
  auto u = testing::random_floats(rng, n, -12.0f, 12.0f);
  std::vector<float> out(static_cast<size_t>(n)), ref(static_cast<size_t>(n));
  clamped_swiglu_mul(g.data(), u.data(), n, kAlpha, kLimit, out.data());
  reference::clamped_swiglu_mul(g.data(), u.data(), n, kAlpha, kLimit, ref.data());
  for (int64_t i = 0; i < n; ++i) {
    const double gi = std::min<double>(g[static_cast<size_t>(i)], kLimit);
    const double ui = std::clamp<double>(u[static_cast<size_t>(i)], -kLimit, kLimit) + 1.0;
    const double t = double{kAlpha} * gi, exact = gi / (1.0 + std::exp(-t)) * ui;
    ASSERT_LE(std::fabs(out[static_cast<size_t>(i)] - exact), (8 + 8 * std::fabs(t)) * kU * std::fabs(exact) + 1e-37)
        << "gate " << gi << ", up " << ui;
    ASSERT_LE(std::fabs(ref[static_cast<size_t>(i)] - exact), kU * std::fabs(exact) + 1e-37) << i;
  }
  std::vector<float> silu(static_cast<size_t>(n));
  silu_mul(g.data(), u.data(), n, silu.data());
  EXPECT_NE(std::memcmp(silu.data(), out.data(), out.size() * sizeof(float)), 0);
  ThreadPool two(2);
  std::vector<float> pooled = g;
  clamped_swiglu_mul(pooled.data(), u.data(), n, kAlpha, kLimit, pooled.data(), two);
  EXPECT_EQ(std::memcmp(pooled.data(), out.data(), out.size() * sizeof(float)), 0);
  for (int64_t i = 0; i < 8; ++i) {
    float one;
    clamped_swiglu_mul(g.data() + i, u.data() + i, 1, kAlpha, kLimit, &one);
    EXPECT_EQ(std::memcmp(&one, out.data() + i, sizeof one), 0) << i;
  }
}

TEST(AddInplace, IsElementwiseFp32Add) {
  std::mt19937 rng(7);
  auto y = testing::random_floats(rng, 1001);
  auto x = testing::random_floats(rng, 1001);
  auto expected = y;
  for (size_t i = 0; i < y.size(); ++i) expected[i] = static_cast<float>(double{y[i]} + double{x[i]});  // exact then one rounding
  add_inplace(y.data(), x.data(), 1001);
  EXPECT_EQ(std::memcmp(y.data(), expected.data(), y.size() * sizeof(float)), 0);
}

TEST(EmbeddingLookup, EqualsDequantizeRowBitwise) {
  std::mt19937 rng(8);
  for (GGMLType type : {GGMLType::Q8_0, GGMLType::Q4_1, GGMLType::F16, GGMLType::F32, GGMLType::Q6_K}) {
    auto table = testing::random_weights(rng, type, 50, 256);
    std::vector<int32_t> tokens = {0, 49, 7, 7, 23};
    std::vector<float> out(tokens.size() * 256);
    embedding_lookup(table.matrix, tokens.data(), static_cast<int64_t>(tokens.size()), out.data());
    for (size_t t = 0; t < tokens.size(); ++t) {
      auto row = testing::dequantized_row(table.matrix, tokens[t]);
      ASSERT_EQ(std::memcmp(out.data() + t * 256, row.data(), 256 * sizeof(float)), 0) << ggml_type_name(type);
    }
  }
}

TEST(KvStore, ReadsBackWhatWasWrittenAndNothingElse) {
  std::mt19937 rng(9);
  const int64_t num_blocks = 6;
  const int block_size = 16, n_kv = 3, hd = 64;
  const int64_t token_elems = n_kv * hd;
  std::vector<float> kc(static_cast<size_t>(num_blocks * block_size * token_elems), -7.5f), vc(kc.size(), 3.25f);
  const PagedKV cache{kc.data(), vc.data(), num_blocks, block_size, n_kv, hd};
  std::vector<int64_t> slots = {5 * 16 + 15, 0, 2 * 16 + 3, 17, 94};  // distinct slots
  const int64_t n = static_cast<int64_t>(slots.size());
  auto k = testing::random_floats(rng, n * token_elems);
  auto v = testing::random_floats(rng, n * token_elems);
  kv_store(cache, k.data(), v.data(), slots.data(), n);
  std::vector<bool> written(static_cast<size_t>(num_blocks * block_size), false);
  for (int64_t t = 0; t < n; ++t) {
    const int64_t s = slots[static_cast<size_t>(t)];
    written[static_cast<size_t>(s)] = true;
    ASSERT_EQ(std::memcmp(kc.data() + s * token_elems, k.data() + t * token_elems, token_elems * sizeof(float)), 0);
    ASSERT_EQ(std::memcmp(vc.data() + s * token_elems, v.data() + t * token_elems, token_elems * sizeof(float)), 0);
  }
  for (int64_t s = 0; s < num_blocks * block_size; ++s)
    if (!written[static_cast<size_t>(s)])
      for (int64_t e = 0; e < token_elems; ++e) {
        ASSERT_EQ(kc[static_cast<size_t>(s * token_elems + e)], -7.5f);
        ASSERT_EQ(vc[static_cast<size_t>(s * token_elems + e)], 3.25f);
      }
}

}  // namespace
}  // namespace exactly::kernels
