// The scoring statistics (engine/eval/logit_stats.h, engine/eval/perplexity.h) against plain double
// precision: log-sum-exp and KL with std::exp in double (validate.h's KlDivergence), numpy's
// percentile rule, and the chunking rule.
#include "engine/eval/logit_stats.h"

#include <cmath>
#include <random>
#include <vector>

#include "engine/eval/perplexity.h"
#include "engine/eval/validate.h"
#include "gtest/gtest.h"

namespace cact {
namespace {

double LogSumExpDouble(const std::vector<float>& x) {
  double m = -INFINITY, s = 0;
  for (float v : x) m = std::max(m, double(v));
  for (float v : x) s += std::exp(double(v) - m);
  return m + std::log(s);
}

std::vector<float> RandomRow(std::mt19937& rng, size_t n, float scale, float offset) {
  std::normal_distribution<float> d(0, scale);
  std::vector<float> x(n);
  for (float& v : x) v = d(rng) + offset;
  return x;
}

TEST(LogitStats, LogSumExpAndArgmaxMatchDoublePrecision) {
  std::mt19937 rng(7);
  std::vector<float> scratch;
  for (size_t n : {1u, 7u, 8u, 513u, 8192u})
    for (float scale : {0.1f, 3.f, 14.f})
      for (float offset : {0.f, -40.f, 25.f}) {
        const std::vector<float> x = RandomRow(rng, n, scale, offset);
        const LogitRow r = SummarizeLogits(x, scratch);
        // float exp of ~1 ulp, summed in double: ~1e-7 relative on the sum.
        EXPECT_NEAR(r.log_sum_exp, LogSumExpDouble(x), 3e-7) << n << " " << scale;
        const auto mx = std::max_element(x.begin(), x.end());
        EXPECT_EQ(r.argmax, uint32_t(mx - x.begin()));
        EXPECT_EQ(r.max, *mx);
        EXPECT_NEAR(LogProb(x, r, 0), double(x[0]) - LogSumExpDouble(x), 3e-7);
      }
}

TEST(LogitStats, ArgmaxTakesTheFirstOfEqualMaxima) {
  std::vector<float> x = {1, 5, 2, 5, 5}, scratch;
  EXPECT_EQ(SummarizeLogits(x, scratch).argmax, 1u);
}

TEST(LogitStats, KlDivergenceMatchesDoublePrecision) {
  std::mt19937 rng(11);
  std::vector<float> ps, qs;
  for (float noise : {1e-3f, 0.05f, 1.f, 6.f}) {
    const std::vector<float> p = RandomRow(rng, 8192, 4.f, 0.f);
    std::vector<float> q = RandomRow(rng, 8192, noise, 3.f);  // plus a constant offset
    for (size_t i = 0; i < q.size(); ++i) q[i] += p[i];
    const LogitRow rp = SummarizeLogits(p, ps), rq = SummarizeLogits(q, qs);
    const double want = KlDivergence(p, q);
    // The float exp's ~1 ulp leaves an absolute floor of ~1e-8 nats (documented).
    EXPECT_NEAR(KlDivergenceFromRows(p, rp, ps, q, rq), want, 1e-5 * want + 1e-8) << noise;
  }
}

TEST(LogitStats, RowsThatDifferByAConstantHaveZeroDivergence) {
  std::mt19937 rng(3);
  std::vector<float> p = RandomRow(rng, 4096, 5.f, 0.f);
  for (float& v : p) v = std::round(v * 1024) / 1024;  // so that v + 8 is exact
  std::vector<float> q = p, ps, qs;
  const LogitRow rp = SummarizeLogits(p, ps);
  EXPECT_EQ(KlDivergenceFromRows(p, rp, ps, q, SummarizeLogits(q, qs)), 0.0);
  for (float& v : q) v += 8.f;
  EXPECT_EQ(KlDivergenceFromRows(p, rp, ps, q, SummarizeLogits(q, qs)), 0.0);
}

TEST(Perplexity, ChunksAreConsecutiveAndAtMostCtxMinusOneTokens) {
  const auto c = SplitIntoChunks(10, 4);
  ASSERT_EQ(c.size(), 4u);
  EXPECT_EQ(c[0].begin, 0u);
  EXPECT_EQ(c[0].size, 3u);
  EXPECT_EQ(c[3].begin, 9u);
  EXPECT_EQ(c[3].size, 1u);
  EXPECT_EQ(SplitIntoChunks(9, 4).size(), 3u);
  EXPECT_EQ(SplitIntoChunks(0, 4).size(), 0u);
  EXPECT_EQ(SplitIntoChunks(5, 512).size(), 1u);
}

TEST(Perplexity, QuantilesFollowNumpyLinearInterpolation) {
  // numpy.percentile([4, 1, 3, 2], q) for q = 0, 1, 5, 10, 50, 90, 95, 99, 99.9, 100.
  const Quantiles q = QuantilesOf({4, 1, 3, 2});
  EXPECT_DOUBLE_EQ(q.min, 1.0);
  EXPECT_DOUBLE_EQ(q.p01, 1.03);
  EXPECT_DOUBLE_EQ(q.p05, 1.15);
  EXPECT_DOUBLE_EQ(q.p10, 1.3);
  EXPECT_DOUBLE_EQ(q.median, 2.5);
  EXPECT_DOUBLE_EQ(q.p90, 3.7);
  EXPECT_DOUBLE_EQ(q.p95, 3.85);
  EXPECT_DOUBLE_EQ(q.p99, 3.97);
  EXPECT_DOUBLE_EQ(q.p999, 3.997);
  EXPECT_DOUBLE_EQ(q.max, 4.0);
  EXPECT_DOUBLE_EQ(QuantilesOf({5}).p99, 5.0);
}

}  // namespace
}  // namespace cact
