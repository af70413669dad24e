// Codebook -> int8 mapping: round(cb * 127 / max|cb|), scale = max|cb| / 127; ternary exact.
#include <gtest/gtest.h>

#include <cmath>

#include "engine/kernels/cq_kernels.h"
#include "kernel_test_util.h"

namespace cact::kernels {
namespace {

using testing::OfficialCodebook;

TEST(Int8Codebook, OfficialCodebooksMapToNearestInt8) {
  for (uint32_t bits : {2u, 3u, 4u})
    for (uint32_t group : {32u, 64u, 128u, 256u}) {
      std::vector<float> cb = OfficialCodebook(bits, group);
      ASSERT_EQ(cb.size(), size_t(1) << bits);
      auto m = MakeInt8Codebook(cb, bits);
      ASSERT_TRUE(m.ok()) << m.status();
      double maxabs = 0;
      for (float v : cb) maxabs = std::max(maxabs, std::fabs(double(v)));
      EXPECT_FLOAT_EQ(m->scale, float(maxabs) / 127.f);
      int max_int = 0;
      for (size_t k = 0; k < 16; ++k) {
        if (k >= cb.size()) {
          EXPECT_EQ(m->value[k], 0) << "unused entries must be zero";
          continue;
        }
        double exact = cb[k] * 127.0 / maxabs;
        EXPECT_EQ(m->value[k], int(std::nearbyint(exact))) << bits << " " << group << " " << k;
        // The int8 value times the scale is within half a step of the float codebook.
        EXPECT_LE(std::fabs(m->value[k] * double(m->scale) - cb[k]), m->scale * 0.5 * (1 + 1e-6));
        max_int = std::max(max_int, std::abs(int(m->value[k])));
      }
      EXPECT_EQ(max_int, 127);
      for (size_t k = 1; k < cb.size(); ++k) EXPECT_LE(m->value[k - 1], m->value[k]) << "sorted";
    }
}

TEST(Int8Codebook, ReleasedCq2HandComputed) {
  // Spec values at group 128; 127 * v / 0.13346044719 = -126.73, -37.97, 38.10, 127.
  std::vector<float> cb = {-0.1331721395254135f, -0.03990209102630615f, 0.04003528133034706f,
                           0.13346044719219208f};
  auto m = MakeInt8Codebook(cb, 2);
  ASSERT_TRUE(m.ok());
  EXPECT_EQ(m->value[0], -127);
  EXPECT_EQ(m->value[1], -38);
  EXPECT_EQ(m->value[2], 38);
  EXPECT_EQ(m->value[3], 127);
}

TEST(Int8Codebook, TernaryIsExactWithTheLevelAsScale) {
  for (uint32_t group : {32u, 128u}) {
    std::vector<float> cb = OfficialCodebook(5, group);
    ASSERT_EQ(cb.size(), 3u);
    auto m = MakeInt8Codebook(cb, CqCodeBits(kTernaryBits));
    ASSERT_TRUE(m.ok()) << m.status();
    EXPECT_EQ(m->scale, cb[2]);
    // Indexed by crumb: 3 -> -1, 0 -> 0, 1 -> +1 (crumb 2 is invalid and maps to 0).
    EXPECT_EQ(m->value[3], -1);
    EXPECT_EQ(m->value[0], 0);
    EXPECT_EQ(m->value[1], 1);
    EXPECT_EQ(m->value[2], 0);
  }
}

// Each kernel code width reads the LSB-first bitstream the format packs (3-bit codes
// straddle bytes), has the layout its SIMD kernels need, and has a CQ type using it.
TEST(CodeWidths, ReadTheFormatsBitstream) {
  for (const CodeWidth& w : kCodeWidths) {
    SCOPED_TRACE(w.code_bits);
    EXPECT_EQ(FindCodeWidth(w.code_bits), &w);
    bool in_format = false;
    for (const CqType& t : kCqTypes) in_format = in_format || t.code_bits == w.code_bits;
    EXPECT_TRUE(in_format);
    uint8_t row[24] = {};
    const uint32_t n = 8 * sizeof row / w.code_bits;
    ASSERT_EQ(w.RowBytes(n), sizeof row);
    for (uint32_t k = 0; k < n; ++k) {
      const uint32_t code = (k * 7 + 3) % w.levels();
      for (uint32_t b = 0; b < w.code_bits; ++b)
        if ((code >> b) & 1)
          row[(k * w.code_bits + b) / 8] |= uint8_t(1u << ((k * w.code_bits + b) % 8));
    }
    for (uint32_t k = 0; k < n; ++k) EXPECT_EQ(w.code_at(row, k), (k * 7 + 3) % w.levels());
  }
  EXPECT_EQ(FindCodeWidth(2)->layout, kLayoutPerm2);
  EXPECT_EQ(FindCodeWidth(3)->layout, 0u);
  EXPECT_EQ(FindCodeWidth(4)->layout, kLayoutPerm4);
  EXPECT_EQ(FindCodeWidth(5), nullptr);
}

TEST(Int8Codebook, RejectsBadCodebooks) {
  EXPECT_FALSE(MakeInt8Codebook(std::vector<float>{1, 2, 3}, 2).ok());
  EXPECT_FALSE(MakeInt8Codebook(std::vector<float>{0, 0, 0, 0}, 2).ok());
  EXPECT_FALSE(MakeInt8Codebook(std::vector<float>{0, NAN, 1, 2}, 2).ok());
  EXPECT_FALSE(MakeInt8Codebook(std::vector<float>{-1, 0, 2}, CqCodeBits(kTernaryBits)).ok());
  EXPECT_FALSE(MakeInt8Codebook(std::vector<float>{1, 2}, 1).ok());
}

}  // namespace
}  // namespace cact::kernels
