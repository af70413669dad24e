// FWHT against the dense Sylvester Hadamard matrix H[i][j] = (-1)^popcount(i & j).
#include "quant/cq/fwht.h"

#include <gtest/gtest.h>

#include <bit>
#include <cmath>
#include <random>
#include <vector>

namespace cact {
namespace {

std::vector<double> DenseSylvester(const std::vector<float>& x) {
  const size_t n = x.size();
  std::vector<double> y(n, 0.0);
  for (size_t i = 0; i < n; ++i)
    for (size_t j = 0; j < n; ++j) y[i] += (std::popcount(i & j) % 2 ? -1.0 : 1.0) * x[j];
  return y;
}

TEST(Fwht, IntegerInputsAreExactForEverySize) {
  // Small integers: every partial sum is exact in float32, so the result must be exact.
  std::mt19937 rng(7);
  for (size_t n = 1; n <= 1024; n *= 2) {
    std::vector<float> x(n);
    for (float& v : x) v = float(int(rng() % 201) - 100);
    std::vector<double> want = DenseSylvester(x);
    FwhtUnnormalized(x.data(), n);
    for (size_t i = 0; i < n; ++i) ASSERT_EQ(double(x[i]), want[i]) << "n=" << n << " i=" << i;
  }
}

TEST(Fwht, OrthonormalMatchesDenseAndInverts) {
  std::mt19937 rng(11);
  std::normal_distribution<float> normal;
  for (size_t n : {2u, 8u, 32u, 64u, 128u, 256u, 512u}) {
    std::vector<float> x(n);
    for (float& v : x) v = normal(rng);
    std::vector<double> want = DenseSylvester(x);
    std::vector<float> y = x;
    FwhtOrthonormal(y.data(), n);
    const double s = 1.0 / std::sqrt(double(n));
    // float32 butterflies: log2(n) roundings of O(sqrt(n)) sized sums.
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], want[i] * s, 1e-5) << "n=" << n;
    FwhtOrthonormal(y.data(), n);  // H/sqrt(n) is its own inverse
    for (size_t i = 0; i < n; ++i) ASSERT_NEAR(y[i], x[i], 1e-5) << "n=" << n;
  }
}

TEST(Fwht, ScaleIsTheFloat32DenseEntry) {
  EXPECT_EQ(HadamardScale(64), 0.125f);
  EXPECT_EQ(HadamardScale(128), 1.0f / float(std::sqrt(128.0)));
  EXPECT_EQ(HadamardScale(1), 1.0f);
}

}  // namespace
}  // namespace cact
