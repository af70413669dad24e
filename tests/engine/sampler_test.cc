// Sampler: greedy is argmax; sampling frequencies follow softmax(logits / T) (binomial
// bounds at 5 sigma); top-k and top-p restrict the support; a seed makes runs repeatable.
#include <algorithm>
#include <cmath>
#include <map>
#include <random>
#include <vector>

#include <gtest/gtest.h>

#include "engine/sampler.h"

namespace cact {
namespace {

const std::vector<float> kLogits = {1.0f, 3.0f, 2.5f, -1.0f, 3.0f, 0.0f};

TEST(Sampler, GreedyIsArgmaxLowestIdOnTies) {
  Sampler s;
  EXPECT_EQ(s.Sample(kLogits), 1);
  EXPECT_EQ(Argmax(std::vector<float>{-5, -2, -2}), 1);
}

// The two-pass Argmax against the plain loop it replaces, on lengths around its 16-wide
// blocks, with ties, signed zeros, infinities and NaNs (first, inside, everywhere).
TEST(Sampler, ArgmaxIsThePlainLoop) {
  auto plain = [](const std::vector<float>& x) {
    int32_t best = 0;
    for (size_t i = 1; i < x.size(); ++i)
      if (x[i] > x[best]) best = int32_t(i);
    return best;
  };
  std::mt19937 rng(7);
  const float special[] = {0.f, -0.f, INFINITY, -INFINITY, NAN, 2.f, -2.f};
  for (size_t n : {1u, 2u, 15u, 16u, 17u, 31u, 33u, 100u, 8192u})
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<float> x(n);
      for (float& v : x) v = float(int(rng() % 5)) - 2.f;  // many ties
      const int specials = int(rng() % 4);
      for (int k = 0; k < specials; ++k) x[rng() % n] = special[rng() % 7];
      if (trial % 50 == 0) x[0] = NAN;
      if (trial % 50 == 1) std::fill(x.begin(), x.end(), NAN);
      ASSERT_EQ(Argmax(x), plain(x)) << n << " " << trial;
    }
}

TEST(Sampler, FrequenciesFollowSoftmax) {
  const float temperature = 0.7f;
  Sampler s({temperature, 0, 1.0f, 42});
  const int n = 40000;
  std::vector<int> count(kLogits.size(), 0);
  for (int i = 0; i < n; ++i) ++count[s.Sample(kLogits)];
  double z = 0;
  for (float l : kLogits) z += std::exp(l / temperature);
  for (size_t i = 0; i < kLogits.size(); ++i) {
    const double p = std::exp(kLogits[i] / temperature) / z;
    const double sigma = std::sqrt(n * p * (1 - p));
    EXPECT_NEAR(count[i], n * p, 5 * sigma + 1) << i;
  }
}

TEST(Sampler, TopKAndTopPRestrictTheSupport) {
  Sampler k2({5.0f, 2, 1.0f, 1});  // hot temperature: everything would appear without top-k
  std::map<int, int> seen;
  for (int i = 0; i < 2000; ++i) ++seen[k2.Sample(kLogits)];
  EXPECT_EQ(seen.size(), 2u);
  EXPECT_TRUE(seen.count(1) && seen.count(4));  // the two logits of 3.0

  // top_p small enough that the nucleus is the single most likely token.
  Sampler p({1.0f, 0, 0.01f, 1});
  for (int i = 0; i < 200; ++i) EXPECT_EQ(p.Sample(kLogits), 1);

  // top_p = 0.7 at T = 1: probs ~ {.05, .37, .22, .01, .37, .02}; the nucleus is ids 1, 4.
  Sampler p7({1.0f, 0, 0.7f, 3});
  std::map<int, int> nucleus;
  for (int i = 0; i < 2000; ++i) ++nucleus[p7.Sample(kLogits)];
  EXPECT_EQ(nucleus.size(), 2u);
}

TEST(Sampler, SeedMakesRunsRepeatable) {
  Sampler a({1.0f, 0, 1.0f, 7}), b({1.0f, 0, 1.0f, 7}), c({1.0f, 0, 1.0f, 8});
  std::vector<int> ra, rb, rc;
  for (int i = 0; i < 64; ++i) {
    ra.push_back(a.Sample(kLogits));
    rb.push_back(b.Sample(kLogits));
    rc.push_back(c.Sample(kLogits));
  }
  EXPECT_EQ(ra, rb);
  EXPECT_NE(ra, rc);
}

}  // namespace
}  // namespace cact
