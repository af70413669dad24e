// FP16 conversion against numpy (the exporter's astype(float16)) and against an independent
// double-precision formulation of round-to-nearest-even.
#include "quant/cq/fp16.h"

#include <gtest/gtest.h>

#include <cmath>

#include "quant_test_util.h"

namespace cact {
namespace {

using testing::BitsOf;
using testing::ReadRaw;
using testing::RunPythonOracle;
using testing::TempDir;

float FromBits(uint32_t u) {
  float f;
  std::memcpy(&f, &u, 4);
  return f;
}

// Independent reference: the exact value scaled by a power of two, rounded by the FPU's
// nearbyint (ties to even) in double, where every float32 is exact.
uint16_t ReferenceHalf(float f) {
  uint16_t sign = std::signbit(f) ? 0x8000 : 0;
  double a = std::fabs(double(f));
  if (std::isnan(f)) return 0;             // not used for NaN
  if (a >= 65520.0) return sign | 0x7C00;  // halfway to 2^16 and above round to inf
  if (a < std::ldexp(1.0, -14)) return sign | uint16_t(std::nearbyint(std::ldexp(a, 24)));
  int e;
  std::frexp(a, &e);  // a = m * 2^e, m in [0.5, 1): unit of last place is 2^(e-11)
  double m = std::nearbyint(std::ldexp(a, 11 - e));  // 1024..2048
  if (m == 2048.0) {
    m = 1024.0;
    ++e;
  }
  uint32_t biased = uint32_t(e - 1 + 15);
  if (biased >= 31) return sign | 0x7C00;
  return sign | uint16_t(biased << 10 | (uint32_t(m) - 1024));
}

TEST(Fp16, EveryHalfRoundTripsThroughFloat) {
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(FloatToHalf(HalfToFloat(uint16_t(h))), h) << "half 0x" << std::hex << h;
}

TEST(Fp16, EveryHalfDecodesLikeNumpy) {
  TempDir dir;
  ASSERT_TRUE(RunPythonOracle(dir, R"(
import numpy as np
np.arange(65536, dtype=np.uint32).astype(np.uint16).view(np.float16).astype(np.float32).tofile('f32.bin')
)"));
  std::vector<uint32_t> expect = ReadRaw<uint32_t>(dir / "f32.bin");
  ASSERT_EQ(expect.size(), 65536u);
  for (uint32_t h = 0; h < 65536; ++h)
    ASSERT_EQ(BitsOf(HalfToFloat(uint16_t(h))), expect[h]) << "half 0x" << std::hex << h;
}

TEST(Fp16, RandomFloatsEncodeLikeNumpy) {
  // 4M bit patterns: uniform over all floats (NaN and inf included), concentrated around
  // the half range and its subnormal / overflow edges, and exact ties (low 13 bits 0x1000).
  TempDir dir;
  ASSERT_TRUE(RunPythonOracle(dir, R"(
import numpy as np
rs = np.random.RandomState(1234)
n = 1 << 20
u = rs.randint(0, 2**32, size=n, dtype=np.uint64).astype(np.uint32)
exp = rs.randint(96, 146, size=n).astype(np.uint32)
near = (rs.randint(0, 2, size=n).astype(np.uint32) << 31) | (exp << 23) | (rs.randint(0, 1 << 23, size=n).astype(np.uint32))
ties = (near & ~np.uint32(0x1FFF)) | np.uint32(0x1000)
sub = rs.randint(0, 1 << 16, size=n).astype(np.uint32) + np.uint32(0x33000000 - (1 << 15))
bits = np.concatenate([u, near, ties, sub])
bits.tofile('in.bin')
with np.errstate(all='ignore'):
    bits.view(np.float32).astype(np.float16).view(np.uint16).tofile('out.bin')
)"));
  std::vector<uint32_t> in = ReadRaw<uint32_t>(dir / "in.bin");
  std::vector<uint16_t> out = ReadRaw<uint16_t>(dir / "out.bin");
  ASSERT_EQ(in.size(), 4u << 20);
  ASSERT_EQ(out.size(), in.size());
  size_t mismatches = 0;
  for (size_t i = 0; i < in.size(); ++i) {
    uint16_t got = FloatToHalf(FromBits(in[i]));
    if (got != out[i] && ++mismatches <= 10)
      ADD_FAILURE() << "float bits 0x" << std::hex << in[i] << ": got 0x" << got << " numpy 0x"
                    << out[i];
  }
  EXPECT_EQ(mismatches, 0u);
}

TEST(Fp16, StridedSweepMatchesIndependentRounding) {
  // Every 257th float bit pattern (16.7M values, all exponents and signs) plus every
  // pattern of the form (k << 13) +- {0, 1, 0x1000}: the rounding boundaries themselves.
  size_t checked = 0;
  auto check = [&](uint32_t bits) {
    float f = FromBits(bits);
    if (std::isnan(f)) return;
    ++checked;
    ASSERT_EQ(FloatToHalf(f), ReferenceHalf(f)) << "float bits 0x" << std::hex << bits;
  };
  for (uint64_t b = 0; b < (uint64_t{1} << 32); b += 257) check(uint32_t(b));
  for (uint32_t k = 0; k < (1u << 19); ++k)
    for (uint32_t d : {0u, 1u, 0xFFFu, 0x1000u, 0x1001u, 0x1FFFu}) check((k << 13) + d);
  EXPECT_GT(checked, 16000000u);
}

TEST(Fp16, SpecialValues) {
  EXPECT_EQ(FloatToHalf(0.0f), 0x0000);
  EXPECT_EQ(FloatToHalf(-0.0f), 0x8000);
  EXPECT_EQ(FloatToHalf(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalf(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65519.99f), 0x7BFF);
  EXPECT_EQ(FloatToHalf(65520.0f), 0x7C00);  // the tie rounds to even: inf
  EXPECT_EQ(FloatToHalf(-1e9f), 0xFC00);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -24)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: 0
  EXPECT_EQ(FloatToHalf(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalf(std::ldexp(1.0f, -14)), 0x0400);
  uint16_t nan = FloatToHalf(std::nanf(""));
  EXPECT_EQ(nan & 0x7C00, 0x7C00);
  EXPECT_NE(nan & 0x3FF, 0);
  EXPECT_TRUE(std::isnan(HalfToFloat(nan)));
  EXPECT_EQ(HalfToFloat(0x3555), 0.333251953125f);
}

}  // namespace
}  // namespace cact
