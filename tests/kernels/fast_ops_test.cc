// Fast-path numeric kernels: the polynomial exp against libm (double), sigmoid/SiLU, the
// orthonormal FWHT against the dense Hadamard matrix, int8 attention against a plain
// double oracle, and bit-identity of every one of them across ISAs.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>

#include "engine/kernels/cq_kernels.h"
#include "engine/kernels/fast_ops.h"
#include "kernel_test_util.h"

namespace cact::kernels {
namespace {

using testing::HadamardSign;
using testing::RandomVector;
using testing::SupportedIsas;

// Runs f under every supported ISA and checks the outputs are bit-identical.
template <typename F>
void ExpectSameOnEveryIsa(F f, const char* what) {
  const Isa before = ActiveIsa();
  std::vector<float> base;
  for (Isa isa : SupportedIsas()) {
    SetActiveIsa(isa);
    std::vector<float> out = f();
    if (base.empty()) base = out;
    ASSERT_EQ(out.size(), base.size());
    EXPECT_EQ(0, std::memcmp(out.data(), base.data(), out.size() * 4))
        << what << " " << IsaName(isa);
  }
  SetActiveIsa(before);
}

TEST(FastOps, ExpIsWithinFourUlpOfLibm) {
  double worst = 0;
  for (double x = -87.0; x <= 88.0; x += 0.00731) {
    const double want = std::exp(double(float(x)));
    const double got = Exp(float(x));
    worst = std::max(worst, std::fabs(got - want) / want);
  }
  std::printf("  worst relative error of Exp on [-87, 88]: %.3g (float ulp 5.96e-8)\n", worst);
  EXPECT_LT(worst, 2.5e-7);
  EXPECT_EQ(Exp(0.f), 1.f);
  EXPECT_TRUE(std::isnan(Exp(NAN)));
  EXPECT_GT(Exp(-1000.f), 0.f);  // clamped: tiny but not 0
  EXPECT_LT(Exp(-1000.f), 2e-38f);
  EXPECT_TRUE(std::isfinite(Exp(1000.f)));
}

TEST(FastOps, SigmoidAndSilu) {
  std::vector<float> x;
  for (float v = -30.f; v <= 30.f; v += 0.0137f) x.push_back(v);
  std::vector<float> s = x, u = x;
  SigmoidInPlace(s.data(), s.size());
  SiluInPlace(u.data(), u.size());
  for (size_t i = 0; i < x.size(); ++i) {
    const double sig = 1.0 / (1.0 + std::exp(-double(x[i])));
    EXPECT_NEAR(s[i], sig, 4e-7 * sig) << x[i];
    EXPECT_NEAR(u[i], x[i] * sig, 4e-7 * std::fabs(x[i] * sig) + 1e-30) << x[i];
  }
  ExpectSameOnEveryIsa(
      [&] {
        auto y = x;
        SigmoidInPlace(y.data(), y.size());
        return y;
      },
      "sigmoid");
  ExpectSameOnEveryIsa(
      [&] {
        auto y = x;
        SiluInPlace(y.data(), y.size());
        return y;
      },
      "silu");
  ExpectSameOnEveryIsa(
      [&] {
        auto y = x;
        ExpInPlace(y.data(), y.size());
        return y;
      },
      "exp");
}

TEST(FastOps, FwhtMatchesDenseHadamard) {
  std::mt19937 rng(2);
  for (uint32_t n : {16u, 128u, 512u, 1024u}) {
    std::vector<float> x = RandomVector(n, rng);
    std::vector<float> y = x;
    FwhtOrthonormal(y.data(), n);
    double err = 0, norm = 0;
    for (uint32_t i = 0; i < n; ++i) {
      double want = 0;
      for (uint32_t j = 0; j < n; ++j) want += HadamardSign(i, j) * x[j];
      want /= std::sqrt(double(n));
      err = std::max(err, std::fabs(y[i] - want));
      norm = std::max(norm, std::fabs(want));
    }
    EXPECT_LT(err, 1e-5 * norm) << n;
    ExpectSameOnEveryIsa(
        [&] {
          auto z = x;
          FwhtOrthonormal(z.data(), n);
          return z;
        },
        "fwht");
  }
}

// Random int8 keys (the quad layout of `stride` rows, KeyOffset; the pad columns of the last
// quad random too, which no score may read) and values with their per-row scales.
struct KvRows {
  std::vector<int8_t> kt, v;
  std::vector<float> ks, vs;
};
KvRows RandomKv(uint32_t hd, uint32_t stride, std::mt19937& rng) {
  KvRows r{std::vector<int8_t>(KeyBytes(hd, stride)), std::vector<int8_t>(size_t(stride) * hd),
           std::vector<float>(stride), std::vector<float>(stride)};
  for (auto& e : r.kt) e = int8_t(int(rng() % 255) - 127);
  for (auto& e : r.v) e = int8_t(int(rng() % 255) - 127);
  for (auto& e : r.ks) e = 0.002f + (rng() % 1000) * 1e-5f;
  for (auto& e : r.vs) e = 0.01f + (rng() % 1000) * 1e-5f;
  return r;
}

TEST(FastOps, AttentionMatchesDoubleOracleAndIsIdenticalOnEveryIsa) {
  std::mt19937 rng(3);
  // n_q: the kernels take queries in groups (AVX2: up to 8, with 1-4 row vectors per pass).
  for (ActPrecision query : {ActPrecision::kInt8, ActPrecision::kInt8x2})
    for (uint32_t hd : {24u, 30u, 64u, 128u})
      for (uint32_t rows : {1u, 17u, 300u})
        for (uint32_t n_q : {1u, 2u, 3u, 9u}) {
          const uint32_t stride = rows + 5;
          auto [kt, v, ks, vs] = RandomKv(hd, stride, rng);
          std::vector<float> q = RandomVector(size_t(n_q) * hd, rng);
          // Runs: rows [3, 3 + a) then [0, 3) (a wrapped ring plus a pinned row).
          AttentionRuns runs;
          const uint32_t a = rows > 3 ? rows - 3 : rows;
          runs.Add(rows > 3 ? 3 : 0, a);
          if (rows > 3) runs.Add(0, 3);
          std::vector<float> scratch(size_t(n_q) * (rows + 16));
          auto run = [&] {
            std::vector<float> out(size_t(n_q) * hd);
            AttendInt8(runs, kt.data(), stride, ks.data(), v.data(), vs.data(), hd, q.data(), n_q,
                       query, out.data(), scratch.data());
            return out;
          };
          std::vector<float> out = run();
          for (uint32_t i = 0; i < n_q; ++i) {
            // The query as the contract quantizes it: absmax int8, and with kInt8x2 the
            // rounding residual in 1/128 steps.
            float amax = 0;
            for (uint32_t c = 0; c < hd; ++c) amax = std::max(amax, std::fabs(q[i * hd + c]));
            std::vector<double> q8(hd);
            for (uint32_t c = 0; c < hd; ++c) {
              const float p = q[i * hd + c] * (127.f / amax);
              const float q1 = std::clamp(std::nearbyint(p), -127.f, 127.f);
              q8[c] = q1;
              if (query == ActPrecision::kInt8x2)
                q8[c] += std::clamp(std::nearbyint((p - q1) * 128.f), -127.f, 127.f) / 128.0;
            }
            std::vector<double> s;
            std::vector<size_t> idx;
            for (int k = 0; k < runs.n; ++k)
              for (uint32_t j = 0; j < runs.count[k]; ++j) {
                size_t r = runs.start[k] + j;
                double d = 0;
                for (uint32_t c = 0; c < hd; ++c) d += q8[c] * kt[KeyOffset(c, r, stride)];
                s.push_back(d * (double(amax) / 127) * ks[r] / std::sqrt(double(hd)));
                idx.push_back(r);
              }
            double mx = *std::max_element(s.begin(), s.end()), sum = 0;
            for (double& e : s) sum += (e = std::exp(e - mx));
            for (uint32_t c = 0; c < hd; ++c) {
              double want = 0;
              for (size_t t = 0; t < s.size(); ++t)
                want += s[t] / sum * vs[idx[t]] * v[idx[t] * hd + c];
              ASSERT_NEAR(out[i * hd + c], want, 1e-5 * (1 + std::fabs(want)))
                  << hd << " " << rows << " " << n_q << " " << int(query);
            }
          }
          ExpectSameOnEveryIsa(run, "attention");
        }
}

// The attention's edge cases, on every ISA and both query levels: an all-zero query scores
// every row 0 (uniform weights: the mean of the dequantized values); a query with a NaN or
// an infinity scores NaN, and a NaN value scale makes a NaN weight (so the output is NaN,
// never a silent number).
TEST(FastOps, AttentionOfZeroAndNonFiniteQueries) {
  std::mt19937 rng(21);
  const uint32_t hd = 64, rows = 70, stride = rows;
  auto [kt, v, ks, vs] = RandomKv(hd, stride, rng);
  AttentionRuns runs;
  runs.Add(0, rows);
  std::vector<float> scratch(2 * (rows + 16));
  for (ActPrecision query : {ActPrecision::kInt8, ActPrecision::kInt8x2}) {
    for (float bad : {0.f, NAN, INFINITY}) {
      std::vector<float> q(2 * hd, 0.f);
      if (bad != 0.f) {
        for (uint32_t c = 0; c < 2 * hd; ++c) q[c] = 0.1f * float(c % 7);
        q[5] = bad;
        q[hd + 9] = bad;
      }
      auto run = [&] {
        std::vector<float> out(2 * hd);
        AttendInt8(runs, kt.data(), stride, ks.data(), v.data(), vs.data(), hd, q.data(), 2, query,
                   out.data(), scratch.data());
        return out;
      };
      std::vector<float> out = run();
      for (uint32_t c = 0; c < 2 * hd; ++c) {
        if (bad != 0.f) {
          ASSERT_TRUE(std::isnan(out[c])) << c;
          continue;
        }
        double mean = 0;
        for (uint32_t r = 0; r < rows; ++r) mean += double(vs[r]) * v[r * hd + c % hd] / rows;
        ASSERT_NEAR(out[c], mean, 1e-5 * (1 + std::fabs(mean))) << c;
      }
      ExpectSameOnEveryIsa(run, "attention edge cases");
    }
    // A non-finite value scale poisons the weights: NaN out, not a number from the rest.
    auto vs_bad = vs;
    vs_bad[10] = NAN;
    std::vector<float> q(2 * hd);
    for (uint32_t c = 0; c < 2 * hd; ++c) q[c] = 0.1f * float(c % 5);
    auto run = [&] {
      std::vector<float> out(2 * hd);
      AttendInt8(runs, kt.data(), stride, ks.data(), v.data(), vs_bad.data(), hd, q.data(), 2,
                 query, out.data(), scratch.data());
      return out;
    };
    for (float o : run()) ASSERT_TRUE(std::isnan(o));
    ExpectSameOnEveryIsa(run, "attention with a NaN value scale");
    // No visible row: every output 0.
    auto none = [&] {
      std::vector<float> out(2 * hd, -1.f);
      AttendInt8(AttentionRuns{}, kt.data(), stride, ks.data(), v.data(), vs.data(), hd, q.data(),
                 2, query, out.data(), scratch.data());
      return out;
    };
    for (float o : none()) ASSERT_EQ(o, 0.f);
    ExpectSameOnEveryIsa(none, "attention over no rows");
  }
}

// A block of query tokens: each token's output is AttendInt8's over its own rows, bit for
// bit, on every ISA; unions with a pinned run and a wrapped ring, tokens that see only
// pinned rows, and 1..12 queries (groups of up to 8 in the AVX-512 kernel).
TEST(FastOps, AttentionBlockIsPerTokenAttentionOnEveryIsa) {
  std::mt19937 rng(11);
  for (ActPrecision query : {ActPrecision::kInt8, ActPrecision::kInt8x2})
    for (uint32_t hd : {24u, 30u, 64u, 72u})
      for (uint32_t n_q : {1u, 2u, 3u})
        for (uint32_t tokens = 1; tokens <= AttentionBlock::kMaxTokens; ++tokens) {
          const uint32_t stride = 300;
          auto [kt, v, ks, vs] = RandomKv(hd, stride, rng);
          // Union: pinned rows [0, 3), then the ring from row 50 to 299 and on from row 3.
          AttentionBlock b;
          b.runs.Add(0, 3);
          b.runs.Add(50, 250);
          b.runs.Add(3, 40);
          b.tokens = tokens;
          for (uint32_t t = 0; t < tokens; ++t) {
            b.head[t] = 3;
            b.from[t] = 3 + 7 * t;
            b.to[t] = 293 - 5 * (tokens - 1 - t);
          }
          if (tokens > 1) b.head[0] = 2, b.from[0] = b.to[0] = 3;  // pinned rows only
          const size_t qs = size_t(n_q) * hd + 5;
          std::vector<float> q = RandomVector(tokens * qs, rng);
          std::vector<float> scratch(AttendBlockScratch(stride, n_q));
          auto block = [&] {
            std::vector<float> out(tokens * qs, -1.f);
            AttendInt8Block(b, kt.data(), stride, ks.data(), v.data(), vs.data(), hd, q.data(), qs,
                            n_q, query, out.data(), qs, scratch.data());
            return out;
          };
          std::vector<float> want(tokens * qs, -1.f);
          for (uint32_t t = 0; t < tokens; ++t)
            AttendInt8(b.TokenRuns(t), kt.data(), stride, ks.data(), v.data(), vs.data(), hd,
                       q.data() + t * qs, n_q, query, want.data() + t * qs, scratch.data());
          std::vector<float> got = block();
          ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4))
              << hd << " " << n_q << " " << tokens;
          ExpectSameOnEveryIsa(block, "attention block");
        }
}

TEST(FastOps, QuantizeInt8PerVector) {
  std::mt19937 rng(5);
  for (uint32_t n : {1u, 24u, 64u, 100u}) {
    std::vector<float> x = RandomVector(n, rng, 3.0);
    auto run = [&] {
      std::vector<int8_t> q(n);
      float s;
      QuantizeInt8(x.data(), n, q.data(), &s);
      std::vector<float> out(q.begin(), q.end());
      out.push_back(s);
      return out;
    };
    std::vector<float> r = run();
    float amax = 0;
    for (float v : x) amax = std::max(amax, std::fabs(v));
    EXPECT_EQ(r[n], amax / 127.f);
    for (uint32_t i = 0; i < n; ++i) EXPECT_EQ(r[i], std::nearbyint(x[i] * (127.f / amax))) << i;
    ExpectSameOnEveryIsa(run, "quantize");
  }
  std::vector<float> z(10, 0.f), bad(10, 1.f);
  bad[7] = NAN;
  std::vector<int8_t> q(10, 5);
  float s = 1;
  QuantizeInt8(z.data(), 10, q.data(), &s);
  EXPECT_EQ(s, 0.f);
  QuantizeInt8(bad.data(), 10, q.data(), &s);
  EXPECT_TRUE(std::isnan(s));
  for (int8_t v : q) EXPECT_EQ(v, 0);
}

TEST(FastOps, MixLanesMatchesDefinition) {
  std::mt19937 rng(6);
  for (uint32_t m : {4u, 3u}) {
    const uint32_t d = 100;
    std::vector<float> P = RandomVector(m * m, rng), X = RandomVector(m * d, rng),
                       h = RandomVector(m, rng), x = RandomVector(d, rng), u = RandomVector(d, rng);
    auto run = [&] {
      std::vector<float> out(m * d);
      MixLanes(P.data(), X.data(), h.data(), x.data(), u.data(), m, d, out.data());
      return out;
    };
    std::vector<float> out = run();
    for (uint32_t i = 0; i < m; ++i)
      for (uint32_t c = 0; c < d; ++c) {
        double want = double(h[i]) * (double(x[c]) - u[c]);
        for (uint32_t j = 0; j < m; ++j) want += double(P[i * m + j]) * X[j * d + c];
        EXPECT_NEAR(out[i * d + c], want, 1e-5 * (1 + std::fabs(want)));
      }
    ExpectSameOnEveryIsa(run, "mix");
  }
}

}  // namespace
}  // namespace cact::kernels
