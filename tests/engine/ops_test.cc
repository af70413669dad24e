// Unit tests of the forward pass building blocks against independent oracles: a dense
// Hadamard matrix, the definition of doubly stochastic, uint32 hashes computed with Python
// big integers masked to 32 bits, and the RoPE formula written out with doubles.
#include <cmath>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/forward.h"
#include "engine/ops.h"
#include "quant/cq/fwht.h"

namespace cact {
namespace {

// Sylvester Hadamard entry: (-1)^popcount(i & j).
float HadamardEntry(uint32_t i, uint32_t j) { return __builtin_popcount(i & j) % 2 ? -1.0f : 1.0f; }

TEST(Ops, FwhtMatchesDenseHadamard) {
  std::mt19937 rng(1);
  std::normal_distribution<float> nd;
  for (uint32_t n : {1u, 2u, 8u, 128u, 512u}) {
    std::vector<float> x(n);
    for (float& v : x) v = nd(rng);
    std::vector<double> want(n, 0.0);
    for (uint32_t i = 0; i < n; ++i)
      for (uint32_t j = 0; j < n; ++j)
        want[i] += HadamardEntry(i, j) * double(x[j]) / std::sqrt(double(n));
    std::vector<float> got = x;
    FwhtOrthonormal(got.data(), n);
    for (uint32_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], want[i], 1e-5) << "n=" << n << " i=" << i;
    // Orthonormal and symmetric: applying it twice gives the input back.
    FwhtOrthonormal(got.data(), n);
    for (uint32_t i = 0; i < n; ++i) EXPECT_NEAR(got[i], x[i], 1e-5);
  }
}

TEST(Ops, SinkhornRowsAndColumnsSumToOne) {
  std::mt19937 rng(7);
  std::normal_distribution<float> nd(0.0f, 1.0f);  // mHC logits are O(1)
  for (uint32_t m : {2u, 4u, 6u}) {
    std::vector<float> a(m * m);
    for (float& v : a) v = nd(rng);
    ops::SinkhornLog(a.data(), m, kNeedle2Block.sinkhorn_iters);
    for (uint32_t i = 0; i < m; ++i) {
      double row = 0, col = 0;
      for (uint32_t j = 0; j < m; ++j) {
        EXPECT_GT(a[i * m + j], 0.0f);
        row += a[i * m + j];
        col += a[j * m + i];
      }
      // Columns are normalised last, so they are exact to rounding; rows converge (20
      // iterations on logits of spread ~1 leave them within 1e-3; spread 3 leaves 1e-2).
      EXPECT_NEAR(col, 1.0, 1e-5) << "m=" << m;
      EXPECT_NEAR(row, 1.0, 1e-3) << "m=" << m;
    }
  }
}

TEST(Ops, SinkhornOfConstantIsUniform) {
  std::vector<float> a(16, 5.0f);
  ops::SinkhornLog(a.data(), 4, kNeedle2Block.sinkhorn_iters);
  for (float v : a) EXPECT_NEAR(v, 0.25f, 1e-6);
}

TEST(Ops, SinkhornIsExactlyTwentyRowThenColumnPasses) {
  // One iteration by hand on a 2x2: rows first, then columns.
  std::vector<float> a = {0.0f, 1.0f, 2.0f, 5.0f};
  std::vector<double> b(a.begin(), a.end());
  auto lse = [](double x, double y) { return std::log(std::exp(x) + std::exp(y)); };
  for (int it = 0; it < 1; ++it) {
    double r0 = lse(b[0], b[1]), r1 = lse(b[2], b[3]);
    b[0] -= r0;
    b[1] -= r0;
    b[2] -= r1;
    b[3] -= r1;
    double c0 = lse(b[0], b[2]), c1 = lse(b[1], b[3]);
    b[0] -= c0;
    b[2] -= c0;
    b[1] -= c1;
    b[3] -= c1;
  }
  ops::SinkhornLog(a.data(), 2, 1);
  for (int i = 0; i < 4; ++i) EXPECT_NEAR(a[i], std::exp(b[i]), 1e-6);
}

TEST(Ops, EngramSlotMatchesHandComputedUint32) {
  // Expected values from Python: acc = (0x9E3779B9*(t+1)) & M; acc = ((acc ^ tok) *
  // 0x01000193) & M per token; acc ^= acc >> 15; slot = acc % slots.
  const std::vector<int32_t> h = {2, 306, 4, 319, 8191, 65535};
  struct C {
    uint32_t table, order;
    size_t t;
    uint32_t slots, slot;
  };
  const C cases[] = {
      {0, 2, 1, 8192, 184},   // acc 3913900216
      {1, 2, 1, 8192, 385},   // acc 259244417
      {2, 3, 2, 8192, 2485},  // acc 391932341
      {3, 3, 5, 8192, 201},   // acc 3868901577
      {0, 2, 0, 256, 199},    // token before the start counts as 0; acc 171581383
      {3, 3, 0, 128, 80},     // acc 3088582480
      {1, 2, 4, 8192, 1660},  // acc 1045571196
  };
  for (const C& c : cases)
    EXPECT_EQ(ops::EngramSlot(kNeedle2Block, c.table, c.order, h, c.t, c.slots), c.slot)
        << "table " << c.table << " order " << c.order << " t " << c.t;
}

TEST(Ops, RopeIsHalfSplitNotInterleaved) {
  const uint32_t hd = 8;
  const float theta = 10000.0f;
  std::vector<float> inv = ops::RopeInvFreq(hd, theta);
  std::vector<float> x(hd);
  for (uint32_t i = 0; i < hd; ++i) x[i] = 0.5f + float(i);
  for (uint32_t pos : {0u, 1u, 37u, 2047u}) {
    std::vector<float> got = x;
    ops::RopeHalfSplit(got.data(), hd, pos, inv);
    for (uint32_t i = 0; i < hd / 2; ++i) {
      const double ang = double(pos) * std::pow(double(theta), -2.0 * i / hd);
      const double x1 = x[i], x2 = x[i + hd / 2];
      // Angle error grows with the position (float32 angle, as in the official code).
      const double tol = 1e-5 + 2e-7 * pos * std::fabs(x1 + x2);
      EXPECT_NEAR(got[i], x1 * std::cos(ang) - x2 * std::sin(ang), tol) << pos << " " << i;
      EXPECT_NEAR(got[i + hd / 2], x2 * std::cos(ang) + x1 * std::sin(ang), tol) << pos << " " << i;
    }
  }
  // Position 0 is the identity.
  std::vector<float> same = x;
  ops::RopeHalfSplit(same.data(), hd, 0, inv);
  EXPECT_EQ(same, x);
}

TEST(Ops, ZcnAndRmsUnit) {
  std::vector<float> x = {1, -2, 3, -4};
  std::vector<float> g = {0, 1, -0.5f, 0.25f};
  const double rms = std::sqrt((1 + 4 + 9 + 16) / 4.0 + 1e-6);
  std::vector<float> y(4), u(4);
  ops::Zcn(x.data(), g.data(), 4, 1e-6f, y.data());
  ops::RmsUnit(x.data(), 4, 1e-6f, u.data());
  for (int i = 0; i < 4; ++i) {
    EXPECT_NEAR(y[i], (1 + g[i]) * x[i] / rms, 1e-6);
    EXPECT_NEAR(u[i], x[i] / rms, 1e-6);
  }
}

// The reference path's bits depend on Dot's summation order: element i goes to lane i % 8,
// the lanes are added pairwise as ((0+4)+(1+5))+((2+6)+(3+7)). Every length up to 40, so
// each tail length is checked, against that order written out plainly.
TEST(Ops, DotSumsInEightLanesInAFixedOrder) {
  for (size_t n = 0; n <= 40; ++n) {
    std::vector<float> a(n), b(n);
    for (size_t i = 0; i < n; ++i) {
      a[i] = std::sin(0.7f * float(i) + 0.3f) * 1e3f;
      b[i] = std::cos(1.3f * float(i)) / 7.0f;
    }
    float lane[8] = {0, 0, 0, 0, 0, 0, 0, 0};
    for (size_t i = 0; i < n; ++i) lane[i % 8] += a[i] * b[i];
    const float want =
        ((lane[0] + lane[4]) + (lane[1] + lane[5])) + ((lane[2] + lane[6]) + (lane[3] + lane[7]));
    EXPECT_EQ(ops::Dot(a.data(), b.data(), n), want) << "n = " << n;
  }
}

TEST(Ops, DotAndMatVec) {
  std::vector<float> a(37), b(37);
  double want = 0;
  for (int i = 0; i < 37; ++i) {
    a[i] = 0.1f * i - 1;
    b[i] = 0.3f - 0.01f * i * i;
    want += double(a[i]) * b[i];
  }
  EXPECT_NEAR(ops::Dot(a.data(), b.data(), 37), want, 1e-5);
  std::vector<float> w(3 * 37);
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::sin(float(i));
  std::vector<float> y(3);
  ops::MatVec(w.data(), 3, 37, a.data(), y.data(), 2);
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int c = 0; c < 37; ++c) s += double(w[r * 37 + c]) * a[c];
    EXPECT_NEAR(y[r], s, 1e-5);
  }
}

}  // namespace
}  // namespace cact

namespace cact {
namespace {

TEST(AttentionWindow, VisibilityRule) {
  const AttentionWindow causal{0, 0}, w4{4, 0}, w4s2{4, 2};
  EXPECT_TRUE(causal.Visible(100, 0));
  EXPECT_FALSE(causal.Visible(3, 4));  // never the future
  EXPECT_TRUE(w4.Visible(10, 7));      // q - k = 3 < 4
  EXPECT_FALSE(w4.Visible(10, 6));     // q - k = 4
  EXPECT_FALSE(w4.Visible(10, 0));
  EXPECT_TRUE(w4s2.Visible(10, 0));  // pinned
  EXPECT_TRUE(w4s2.Visible(10, 1));
  EXPECT_FALSE(w4s2.Visible(10, 2));
  EXPECT_FALSE(w4s2.Visible(1, 2));  // pinned keys are still causal
}

}  // namespace
}  // namespace cact
