// The training attention's CPU twin in double precision: the forward against
// a direct softmax, the backward against central finite differences of
// L = sum(W * out) (so dL/d(out) = W), over causal and full masks, grouped
// heads, uneven varlen batches (more queries than keys included), tile edges
// and a key no query sees. Also: the bits do not depend on the thread count,
// and a wrong gradient (the D term dropped) fails the same check.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <stdexcept>
#include <vector>

#include "core/thread_pool.h"
#include "kernels/cpu/flash_train.h"

namespace exactly::kernels::cpu::train {
namespace {

struct Case {
  std::vector<int32_t> q_lens, k_lens;
  int n_heads, n_kv_heads, head_dim;
  bool causal;
};

struct Problem {
  Case c;
  std::vector<int32_t> cu_q{0}, cu_k{0};
  std::vector<double> q, k, v, w;  // w = dL/d(out)
  double scale;

  Problem(const Case& cs, uint32_t seed) : c(cs), scale(1.0 / std::sqrt(double(cs.head_dim))) {
    for (size_t s = 0; s < cs.q_lens.size(); ++s) {
      cu_q.push_back(cu_q.back() + cs.q_lens[s]);
      cu_k.push_back(cu_k.back() + cs.k_lens[s]);
    }
    std::mt19937 rng(seed);
    std::normal_distribution<double> normal;
    auto fill = [&](std::vector<double>& x, int64_t n) {
      x.resize(n);
      for (auto& e : x) e = normal(rng);
    };
    fill(q, int64_t{cu_q.back()} * cs.n_heads * cs.head_dim);
    fill(k, int64_t{cu_k.back()} * cs.n_kv_heads * cs.head_dim);
    fill(v, static_cast<int64_t>(k.size()));
    fill(w, static_cast<int64_t>(q.size()));
  }
  VarlenShape shape() const {
    return {static_cast<int32_t>(c.q_lens.size()), cu_q.data(), cu_k.data(), c.n_heads, c.n_kv_heads,
            c.head_dim, c.causal};
  }
  struct Forward {
    std::vector<double> out, lse;
  };
  Forward forward(ThreadPool& pool) const {
    Forward f{std::vector<double>(q.size()), std::vector<double>(int64_t{cu_q.back()} * c.n_heads)};
    flash_forward(shape(), scale, q.data(), k.data(), v.data(), f.out.data(), f.lse.data(), pool);
    return f;
  }
  double loss(ThreadPool& pool) const {
    const Forward f = forward(pool);
    double sum = 0;
    for (size_t i = 0; i < w.size(); ++i) sum += w[i] * f.out[i];
    return sum;
  }
  struct Grads {
    std::vector<double> dq, dk, dv;
  };
  Grads backward(ThreadPool& pool) const {
    const Forward f = forward(pool);
    Grads g{std::vector<double>(q.size(), std::nan("")), std::vector<double>(k.size(), std::nan("")),
            std::vector<double>(v.size(), std::nan(""))};
    flash_backward(shape(), scale, q.data(), k.data(), v.data(), f.out.data(), w.data(), f.lse.data(),
                   Gradients<double>{g.dq.data(), g.dk.data(), g.dv.data()}, pool);
    return g;
  }
};

// Direct softmax attention of one query row and head, in double.
std::vector<double> direct_row(const Problem& p, int s, int i, int h) {
  const int d = p.c.head_dim, kv = h / (p.c.n_heads / p.c.n_kv_heads);
  const int lq = p.c.q_lens[s], lk = p.c.k_lens[s];
  const int seen = p.c.causal ? std::clamp(i + lk - lq + 1, 0, lk) : lk;
  std::vector<double> out(d, 0.0), score(seen);
  if (seen == 0) return out;
  const double* qr = &p.q[(int64_t{p.cu_q[s] + i} * p.c.n_heads + h) * d];
  for (int j = 0; j < seen; ++j) {
    const double* kr = &p.k[(int64_t{p.cu_k[s] + j} * p.c.n_kv_heads + kv) * d];
    double dot = 0;
    for (int x = 0; x < d; ++x) dot += qr[x] * kr[x];
    score[j] = dot * p.scale;
  }
  const double mx = *std::max_element(score.begin(), score.end());
  double total = 0;
  for (double& e : score) total += (e = std::exp(e - mx));
  for (int j = 0; j < seen; ++j) {
    const double* vr = &p.v[(int64_t{p.cu_k[s] + j} * p.c.n_kv_heads + kv) * d];
    for (int x = 0; x < d; ++x) out[x] += score[j] / total * vr[x];
  }
  return out;
}

// max |analytic - numeric| / (1 + |numeric|) over every element of x.
double gradient_error(Problem& p, std::vector<double>& x, const std::vector<double>& analytic, ThreadPool& pool) {
  constexpr double kStep = 1e-5;
  double worst = 0;
  for (size_t i = 0; i < x.size(); ++i) {
    const double saved = x[i];
    x[i] = saved + kStep;
    const double up = p.loss(pool);
    x[i] = saved - kStep;
    const double down = p.loss(pool);
    x[i] = saved;
    const double numeric = (up - down) / (2 * kStep);
    worst = std::max(worst, std::abs(analytic[i] - numeric) / (1 + std::abs(numeric)));
  }
  return worst;
}

const std::vector<Case> kCases = {
    {{5}, {5}, 2, 2, 8, true},                     // square, one head per KV head
    {{19}, {19}, 4, 1, 8, true},                   // crosses a tile edge; 4 heads share one KV head
    {{3, 17, 0}, {11, 17, 4}, 4, 2, 6, true},      // chunk after a prefix; an empty sequence
    {{20, 2}, {7, 33}, 2, 1, 5, false},            // full mask, uneven lengths
    {{9}, {4}, 2, 2, 4, true},                     // more queries than keys: 5 rows see nothing
};

TEST(FlashTrain, ForwardMatchesDirectSoftmax) {
  ThreadPool pool(3);
  for (uint32_t n = 0; n < kCases.size(); ++n) {
    Problem p(kCases[n], 11 + n);
    const auto f = p.forward(pool);
    for (int s = 0; s < static_cast<int>(p.c.q_lens.size()); ++s)
      for (int i = 0; i < p.c.q_lens[s]; ++i)
        for (int h = 0; h < p.c.n_heads; ++h) {
          const auto ref = direct_row(p, s, i, h);
          const double* got = &f.out[(int64_t{p.cu_q[s] + i} * p.c.n_heads + h) * p.c.head_dim];
          for (int x = 0; x < p.c.head_dim; ++x) ASSERT_NEAR(got[x], ref[x], 1e-12) << "case " << n;
        }
  }
}

TEST(FlashTrain, BackwardMatchesFiniteDifferences) {
  ThreadPool pool(2);
  for (uint32_t n = 0; n < kCases.size(); ++n) {
    Problem p(kCases[n], 23 + n);
    const auto g = p.backward(pool);
    EXPECT_LT(gradient_error(p, p.q, g.dq, pool), 1e-7) << "dq, case " << n;
    EXPECT_LT(gradient_error(p, p.k, g.dk, pool), 1e-7) << "dk, case " << n;
    EXPECT_LT(gradient_error(p, p.v, g.dv, pool), 1e-7) << "dv, case " << n;
  }
}

TEST(FlashTrain, RowsThatSeeNoKeyAreZeroWithInfiniteLse) {
  ThreadPool pool(1);
  Problem p(kCases[4], 5);
  const auto f = p.forward(pool);
  const auto g = p.backward(pool);
  for (int i = 0; i < 5; ++i)
    for (int h = 0; h < 2; ++h) {
      EXPECT_EQ(f.lse[i * 2 + h], -std::numeric_limits<double>::infinity());
      for (int x = 0; x < 4; ++x) {
        EXPECT_EQ(f.out[(i * 2 + h) * 4 + x], 0.0);
        EXPECT_EQ(g.dq[(i * 2 + h) * 4 + x], 0.0);
      }
    }
  for (double e : g.dk) EXPECT_TRUE(std::isfinite(e));
}

TEST(FlashTrain, BitsDoNotDependOnTheThreadCount) {
  const Case c{{40, 1, 33}, {40, 70, 50}, 8, 2, 16, true};
  Problem p(c, 99);
  ThreadPool one(1), four(4);
  const auto a = p.backward(one), b = p.backward(four);
  EXPECT_EQ(a.dq, b.dq);
  EXPECT_EQ(a.dk, b.dk);
  EXPECT_EQ(a.dv, b.dv);
  EXPECT_EQ(p.forward(one).out, p.forward(four).out);
}

// The check above has teeth: dQ without the D term of dS (a plausible slip)
// is off by far more than the tolerance.
TEST(FlashTrain, GradientCheckCatchesAMissingDeltaTerm) {
  ThreadPool pool(1);
  Problem p(kCases[1], 7);
  const auto f = p.forward(pool);
  std::vector<double> zero_out(f.out.size(), 0.0), dq(p.q.size()), dk(p.k.size()), dv(p.v.size());
  // out = 0 makes D = rowsum(dO * out) = 0: the backward of a wrong formula.
  flash_backward(p.shape(), p.scale, p.q.data(), p.k.data(), p.v.data(), zero_out.data(), p.w.data(),
                 f.lse.data(), Gradients<double>{dq.data(), dk.data(), dv.data()}, pool);
  EXPECT_GT(gradient_error(p, p.q, dq, pool), 1e-2);
}

TEST(FlashTrain, RejectsBadShapesByName) {
  const int32_t cu_q[] = {0, 4, 2}, cu_k[] = {0, 4, 8};
  const VarlenShape decreasing{2, cu_q, cu_k, 2, 1, 8, true};
  EXPECT_THROW(validate(decreasing), std::invalid_argument);
  const int32_t ok_q[] = {0, 4};
  EXPECT_THROW(validate(VarlenShape{1, ok_q, cu_k, 3, 2, 8, true}), std::invalid_argument);
  EXPECT_THROW(validate(VarlenShape{1, ok_q, cu_k, 2, 1, 0, true}), std::invalid_argument);
  EXPECT_THROW(validate(VarlenShape{1, ok_q, cu_k, 2, 1, kMaxHeadDim + 1, true}), std::invalid_argument);
  EXPECT_NO_THROW(validate(VarlenShape{1, ok_q, cu_k, 2, 1, 8, true}));
}

}  // namespace
}  // namespace exactly::kernels::cpu::train
