// CqKernelMatrix::Stack: a matrix made of row ranges of other CQ matrices gives every row
// exactly (bit for bit) what that row's own matrix gives, on every ISA, in decode (MatVec,
// whole and split row ranges) and prefill (MatMat); mismatched parts are refused.
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "engine/kernels/cq_kernels.h"
#include "kernel_test_util.h"

namespace cact::kernels {
namespace {

using testing::MakeRandomCq;
using testing::OfficialCodebook;
using testing::RandomCq;
using testing::RandomVector;
using testing::RowsAndTiles;
using testing::SupportedIsas;

struct Part {
  RandomCq cq;
  CqKernelMatrix m;
};

Part MakePart(uint32_t out, uint32_t in, uint32_t group, uint32_t bits, const Int8Codebook& cb8,
              std::mt19937& rng) {
  RandomCq cq = MakeRandomCq(out, in, group, bits, rng);
  auto m = CqKernelMatrix::Create(cq.blob, out, in, group, cq.code_bits(), cb8);
  EXPECT_TRUE(m.ok()) << m.status();
  return Part{std::move(cq), std::move(m).value()};
}

TEST(CqStack, RowsAreBitIdenticalToTheirPartsOnEveryIsa) {
  std::mt19937 rng(11);
  for (ActPrecision act : {ActPrecision::kInt8, ActPrecision::kInt8x2})
    for (uint32_t bits : {2u, 3u, 4u, 5u})
      for (uint32_t group : {32u, 128u}) {
        const bool residual = act == ActPrecision::kInt8x2 && bits != kTernaryBits;
        const Int8Codebook cb8 =
            MakeInt8Codebook(OfficialCodebook(bits, group), CqCodeBits(bits), residual).value();
        const uint32_t in = 4 * group + 7;
        // Parts like a layer's mHC projections (4, 4, 16 rows), plus odd sizes and offsets.
        std::vector<Part> parts;
        parts.push_back(MakePart(12, in, group, bits, cb8, rng));
        parts.push_back(MakePart(9, in, group, bits, cb8, rng));
        parts.push_back(MakePart(40, in, group, bits, cb8, rng));
        const CqKernelMatrix::RowSlice slices[] = {{&parts[0].m, 4, 8},
                                                   {&parts[1].m, 0, 4},
                                                   {&parts[2].m, 16, 32},
                                                   {&parts[0].m, 11, 12},
                                                   {&parts[1].m, 5, 9}};
        auto stacked = CqKernelMatrix::Stack(slices);
        ASSERT_TRUE(stacked.ok()) << stacked.status();
        ASSERT_EQ(stacked->out(), 29u);

        const uint32_t T = 3;
        std::vector<float> x = RandomVector(size_t(in) * T, rng);
        ActivationBatch a;
        PrepareActivations(Isa::kScalar, x.data(), T, in, in, group, &a, act);
        for (const CqKernelMatrix* stacked_m : RowsAndTiles(*stacked))
          for (Isa isa : SupportedIsas()) {
            const CqKernelMatrix& s = *stacked_m;  // the stack, from its rows or its tiles
            const std::string what = std::string(IsaName(isa)) + " bits " + std::to_string(bits) +
                                     " group " + std::to_string(group) +
                                     (act == ActPrecision::kInt8x2 ? " two-level" : " int8") +
                                     (s.tiles() ? " tiles" : "");
            // Expected: each slice's rows from its own matrix's full product.
            std::vector<float> want(size_t(T) * s.out());
            for (uint32_t t = 0; t < T; ++t) {
              uint32_t row = 0;
              for (const auto& sl : slices) {
                std::vector<float> y(sl.matrix->out());
                MatVecRows(isa, *sl.matrix, a, t, 0, sl.matrix->out(), y.data());
                for (uint32_t r = sl.begin; r < sl.end; ++r)
                  want[size_t(t) * s.out() + row++] = y[r];
              }
            }
            // Decode: whole, and split as two or three threads would split it.
            for (uint32_t n_parts : {1u, 2u, 3u}) {
              std::vector<float> got(want.size(), NAN);
              for (uint32_t t = 0; t < T; ++t)
                for (uint32_t p = 0; p < n_parts; ++p) {
                  RowRange rr = RowSplit(s.out(), n_parts, p);
                  MatVecRows(isa, s, a, t, rr.begin, rr.end, got.data() + size_t(t) * s.out());
                }
              ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4))
                  << what << " matvec parts " << n_parts;
            }
            // Prefill.
            std::vector<float> got(want.size(), NAN);
            MatMatRows(isa, s, a, 0, s.out(), got.data(), s.out());
            ASSERT_EQ(0, std::memcmp(got.data(), want.data(), got.size() * 4)) << what << " matmat";
          }
      }
}

TEST(CqStack, RefusesMismatchedPartsAndBadSlices) {
  std::mt19937 rng(12);
  const Int8Codebook cb2 = MakeInt8Codebook(OfficialCodebook(2, 128), 2).value();
  const Int8Codebook cb2lo = MakeInt8Codebook(OfficialCodebook(2, 128), 2, true).value();
  const Int8Codebook cb4 = MakeInt8Codebook(OfficialCodebook(4, 128), 4).value();
  Part a = MakePart(8, 256, 128, 2, cb2, rng);
  Part wider = MakePart(8, 384, 128, 2, cb2, rng);
  Part four = MakePart(8, 256, 128, 4, cb4, rng);
  Part other_cb = MakePart(8, 256, 128, 2, cb2lo, rng);
  for (const CqKernelMatrix* bad : {&wider.m, &four.m, &other_cb.m}) {
    const CqKernelMatrix::RowSlice s[] = {{&a.m, 0, 8}, {bad, 0, 8}};
    EXPECT_FALSE(CqKernelMatrix::Stack(s).ok());
  }
  const CqKernelMatrix::RowSlice past_end[] = {{&a.m, 4, 9}};
  EXPECT_FALSE(CqKernelMatrix::Stack(past_end).ok());
  const CqKernelMatrix::RowSlice reversed[] = {{&a.m, 5, 4}};
  EXPECT_FALSE(CqKernelMatrix::Stack(reversed).ok());
  const CqKernelMatrix::RowSlice empty[] = {{&a.m, 3, 3}};
  EXPECT_FALSE(CqKernelMatrix::Stack(empty).ok());
  EXPECT_FALSE(CqKernelMatrix::Stack({}).ok());
}

}  // namespace
}  // namespace cact::kernels
