// Activation preparation: the kernel's FWHT + int8 quantization against a dense Hadamard
// oracle, the permuted layouts against their definitions, and bit-identity across ISAs.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/kernels/cq_kernels.h"
#include "kernel_test_util.h"

namespace cact::kernels {
namespace {

using testing::HadamardSign;
using testing::RandomVector;
using testing::SupportedIsas;

// Dense oracle: unnormalised u = H x for one zero-padded group.
std::vector<double> DenseRotate(const std::vector<float>& x, uint32_t in, uint32_t base,
                                uint32_t n) {
  std::vector<double> u(n, 0.0);
  for (uint32_t i = 0; i < n; ++i)
    for (uint32_t j = 0; j < n; ++j)
      if (base + j < in) u[i] += HadamardSign(i, j) * x[base + j];
  return u;
}

struct Shape {
  uint32_t in, group;
};
const Shape kShapes[] = {{32, 32},   {96, 32},   {100, 64},  {128, 128},  {200, 128},
                         {512, 128}, {777, 256}, {512, 512}, {1000, 512}, {24, 128}};

TEST(Prepare, MatchesDenseHadamardAndQuantizesToNearest) {
  std::mt19937 rng(7);
  for (const Shape& s : kShapes) {
    std::vector<float> x = RandomVector(s.in, rng);
    ActivationBatch a;
    PrepareActivations(Isa::kScalar, x.data(), 1, s.in, s.in, s.group, &a);
    ASSERT_EQ(a.in_pad() % s.group, 0u);
    const double inv_sqrt = 1.0 / std::sqrt(double(s.group));
    size_t near_ties = 0;
    for (uint32_t g = 0; g < a.groups(); ++g) {
      std::vector<double> u = DenseRotate(x, s.in, g * s.group, s.group);
      double amax = 0;
      for (double v : u) amax = std::max(amax, std::fabs(v));
      ASSERT_GT(amax, 0);
      const double scale = a.scale(0)[g];
      EXPECT_NEAR(scale, amax * inv_sqrt / 127.0, 1e-5 * scale) << s.in << "/" << s.group;
      int32_t sum = 0;
      for (uint32_t i = 0; i < s.group; ++i) {
        const int q = a.natural(0)[g * s.group + i];
        sum += q;
        const double exact = u[i] * 127.0 / amax;
        // Float butterflies differ from the double oracle by ~1e-6 relative: only values
        // within 1e-3 of a rounding tie may round the other way.
        if (std::fabs(std::fabs(exact - std::trunc(exact)) - 0.5) < 1e-3) {
          ++near_ties;
          EXPECT_LE(std::fabs(q - exact), 0.5 + 1e-3);
        } else {
          EXPECT_EQ(q, int(std::nearbyint(exact)))
              << s.in << "/" << s.group << " g" << g << " i" << i;
        }
        // Dequantized value within half a step of the orthonormal rotation.
        EXPECT_LE(std::fabs(q * scale - u[i] * inv_sqrt), scale * (0.5 + 1e-3));
      }
      EXPECT_EQ(a.sum(0)[g], sum);
    }
    EXPECT_LE(near_ties, size_t(a.in_pad() / 50 + 2));
    for (uint32_t k = a.in_pad(); k % 64; ++k) EXPECT_EQ(a.natural(0)[k], 0) << "padding";
  }
}

TEST(Prepare, HadamardColumnsQuantizeExactly) {
  // x = column j of H (entries +-1): u = H x = n e_j, so q = 127 e_j and scale = sqrt(n)/127.
  for (uint32_t n : {32u, 128u, 512u})
    for (uint32_t j : {0u, 1u, n / 2 + 3, n - 1}) {
      std::vector<float> x(n);
      for (uint32_t i = 0; i < n; ++i) x[i] = float(HadamardSign(i, j));
      for (Isa isa : SupportedIsas()) {
        ActivationBatch a;
        PrepareActivations(isa, x.data(), 1, n, n, n, &a);
        for (uint32_t i = 0; i < n; ++i)
          ASSERT_EQ(a.natural(0)[i], i == j ? 127 : 0) << IsaName(isa);
        EXPECT_FLOAT_EQ(a.scale(0)[0], std::sqrt(float(n)) / 127.f);
        EXPECT_EQ(a.sum(0)[0], 127);
      }
    }
}

TEST(Prepare, PermutedLayoutsFollowTheirDefinitions) {
  std::mt19937 rng(3);
  for (const Shape& s : kShapes) {
    std::vector<float> x = RandomVector(s.in, rng);
    for (Isa isa : SupportedIsas()) {
      ActivationBatch a;
      PrepareActivations(isa, x.data(), 1, s.in, s.in, s.group, &a);
      const int8_t* q = a.natural(0);
      auto nat = [&](uint32_t k) { return k < a.in_pad() ? q[k] : int8_t(0); };
      for (uint32_t k = 0; k < (a.in_pad() + 255) / 256 * 256; ++k) {
        uint32_t c = k / 256, r = k % 256;
        ASSERT_EQ(a.perm2(0)[c * 256 + (r % 4) * 64 + (r / 16) * 4 + (r / 4) % 4], nat(k))
            << IsaName(isa) << " perm2 " << k;
      }
      for (uint32_t k = 0; k < (a.in_pad() + 127) / 128 * 128; ++k) {
        uint32_t c = k / 128, r = k % 128;
        ASSERT_EQ(a.perm4(0)[c * 128 + (r % 2) * 64 + r / 2], nat(k))
            << IsaName(isa) << " perm4 " << k;
      }
    }
  }
}

TEST(Prepare, AllIsasProduceIdenticalBytes) {
  std::mt19937 rng(11);
  for (ActPrecision p : {ActPrecision::kInt8, ActPrecision::kInt8x2})
    for (const Shape& s : kShapes) {
      const uint32_t tokens = 3;
      const int levels = p == ActPrecision::kInt8x2 ? 2 : 1;
      std::vector<float> x = RandomVector(size_t(s.in) * tokens, rng, 3.0);
      ActivationBatch ref;
      PrepareActivations(Isa::kScalar, x.data(), tokens, s.in, s.in, s.group, &ref, p);
      for (Isa isa : SupportedIsas()) {
        ActivationBatch a;
        PrepareActivations(isa, x.data(), tokens, s.in, s.in, s.group, &a, p);
        for (uint32_t t = 0; t < tokens; ++t) {
          for (int l = 0; l < levels; ++l) {
            EXPECT_EQ(0,
                      std::memcmp(a.natural(t, l), ref.natural(t, l), (a.in_pad() + 63) / 64 * 64))
                << IsaName(isa);
            EXPECT_EQ(0,
                      std::memcmp(a.perm2(t, l), ref.perm2(t, l), (a.in_pad() + 255) / 256 * 256))
                << IsaName(isa);
            EXPECT_EQ(0,
                      std::memcmp(a.perm4(t, l), ref.perm4(t, l), (a.in_pad() + 127) / 128 * 128))
                << IsaName(isa);
            EXPECT_EQ(0, std::memcmp(a.sum(t, l), ref.sum(t, l), a.groups() * 4)) << IsaName(isa);
          }
          EXPECT_EQ(0, std::memcmp(a.scale(t), ref.scale(t), a.groups() * 4)) << IsaName(isa);
        }
      }
    }
}

TEST(Prepare, TwoLevelResidualRefinesToASixteenthOfAPercent) {
  // q1 + q2/128 approximates u * 127 / amax within 1/256 (+ float rounding), and q1 is the
  // same as the single-level quantization.
  std::mt19937 rng(13);
  for (const Shape& s : kShapes) {
    std::vector<float> x = RandomVector(s.in, rng);
    ActivationBatch one, two;
    PrepareActivations(Isa::kScalar, x.data(), 1, s.in, s.in, s.group, &one);
    PrepareActivations(Isa::kScalar, x.data(), 1, s.in, s.in, s.group, &two, ActPrecision::kInt8x2);
    ASSERT_TRUE(two.two_level());
    EXPECT_EQ(0, std::memcmp(one.natural(0), two.natural(0, 0), one.in_pad()));
    for (uint32_t g = 0; g < two.groups(); ++g) {
      std::vector<double> u = DenseRotate(x, s.in, g * s.group, s.group);
      double amax = 0;
      for (double v : u) amax = std::max(amax, std::fabs(v));
      int32_t sum2 = 0;
      for (uint32_t i = 0; i < s.group; ++i) {
        const int q1 = two.natural(0, 0)[g * s.group + i], q2 = two.natural(0, 1)[g * s.group + i];
        EXPECT_LE(std::abs(q2), 64);
        EXPECT_NEAR(q1 + q2 / 128.0, u[i] * 127.0 / amax, 1.0 / 256 + 1e-4);
        sum2 += q2;
      }
      EXPECT_EQ(two.sum(0, 1)[g], sum2);
    }
  }
}

TEST(Prepare, ZeroAndNonFiniteGroups) {
  const uint32_t n = 128, in = 3 * n;
  std::mt19937 rng(5);
  std::vector<float> x = RandomVector(in, rng);
  for (uint32_t i = 0; i < n; ++i) x[i] = 0.f;  // group 0: all zero
  x[n + 5] = NAN;                               // group 1: NaN
  for (Isa isa : SupportedIsas()) {
    ActivationBatch a;
    PrepareActivations(isa, x.data(), 1, in, in, n, &a);
    EXPECT_EQ(a.scale(0)[0], 0.f) << IsaName(isa);
    EXPECT_TRUE(std::isnan(a.scale(0)[1])) << IsaName(isa);
    EXPECT_GT(a.scale(0)[2], 0.f) << IsaName(isa);
    for (uint32_t i = 0; i < 2 * n; ++i) ASSERT_EQ(a.natural(0)[i], 0) << IsaName(isa);
    EXPECT_EQ(a.sum(0)[0], 0);
    EXPECT_EQ(a.sum(0)[1], 0);
  }
  std::vector<float> inf(n, 1.f);
  inf[3] = INFINITY;
  for (Isa isa : SupportedIsas()) {
    ActivationBatch a;
    PrepareActivations(isa, inf.data(), 1, n, n, n, &a);
    EXPECT_TRUE(std::isnan(a.scale(0)[0])) << IsaName(isa);
  }
}

}  // namespace
}  // namespace cact::kernels
