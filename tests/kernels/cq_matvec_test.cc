// CQ products: every SIMD kernel gives the scalar kernel's int32 group dots and float
// outputs bit for bit (all widths, groups, tails, odd row counts, row splits, MatMat), the
// group dots match a plain oracle, and the scalar result matches an FP32
// dequantize-then-dot oracle within a rigorous int8 quantization bound.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "engine/kernels/cq_kernels.h"
#include "kernel_test_util.h"

namespace cact::kernels {
namespace {

using testing::Case;
using testing::CodeValue;
using testing::HadamardSign;
using testing::HalfValue;
using testing::kModes;
using testing::MakeCase;
using testing::MakeRandomCq;
using testing::Mode;
using testing::ModeName;
using testing::OfficialCodebook;
using testing::RandomCq;
using testing::RandomVector;
using testing::RowsAndTiles;
using testing::SupportedIsas;

// Shapes with tails: rows not a multiple of 16 or 8, inputs not a multiple of the group or
// of any SIMD chunk.
struct Dims {
  uint32_t out, in;
};
std::vector<Dims> DimsFor(uint32_t group) {
  return {{1, group},
          {7, group * 3 - 5},
          {16, 2 * group},
          {17, 4 * group + 1},
          {33, 512 > group ? 512 : group},
          {40, 5 * group / 2}};
}

const uint32_t kBits[] = {2, 3, 4, 5};
const uint32_t kGroups[] = {32, 64, 128, 256, 512};

// The scalar kernel's outputs [T][out] for T inputs x [T][in] (prepared into *a).
std::vector<float> ScalarOutputs(const Case& c, const std::vector<float>& x, uint32_t T, Dims d,
                                 uint32_t group, Mode mode, ActivationBatch* a) {
  PrepareActivations(Isa::kScalar, x.data(), T, d.in, d.in, group, a, mode.act);
  std::vector<float> ref(size_t(T) * d.out);
  for (uint32_t t = 0; t < T; ++t)
    MatVecRows(Isa::kScalar, c.m, *a, t, 0, d.out, ref.data() + size_t(t) * d.out);
  return ref;
}

TEST(CqKernels, GroupDotsMatchOracleOnEveryIsa) {
  std::mt19937 rng(1);
  for (Mode mode : kModes)
    for (uint32_t bits : kBits)
      for (uint32_t group : kGroups)
        for (Dims d : DimsFor(group)) {
          Case c = MakeCase(d.out, d.in, group, bits, rng, mode.cb_residual);
          std::vector<float> x = RandomVector(d.in, rng);
          ActivationBatch a;
          PrepareActivations(Isa::kScalar, x.data(), 1, d.in, d.in, group, &a, mode.act);
          const uint32_t G = c.m.groups(), ip = c.m.in_pad();
          // D = M * sum hi q1 + [two-level] sum hi q2 + [residual] sum lo q1.
          const bool two = mode.act == ActPrecision::kInt8x2, lo = c.cb8.has_lo;
          const int64_t M = two || lo ? 128 : 1;
          std::vector<int64_t> d1(size_t(d.out) * G, 0), d2(d1.size(), 0);
          for (uint32_t r = 0; r < d.out; ++r)
            for (uint32_t k = 0; k < ip; ++k) {
              const uint32_t code = c.cq.codes[size_t(r) * ip + k];
              const size_t o = size_t(r) * G + k / group;
              d1[o] += int64_t(c.cb8.value[code]) * a.natural(0, 0)[k];
              if (two) d2[o] += int64_t(c.cb8.value[code]) * a.natural(0, 1)[k];
              if (lo) d2[o] += int64_t(c.cb8.lo[code]) * a.natural(0, 0)[k];
            }
          std::vector<int32_t> oracle(d1.size());
          for (size_t i = 0; i < d1.size(); ++i) oracle[i] = int32_t(M * d1[i] + d2[i]);
          for (const CqKernelMatrix* m : RowsAndTiles(c.m))
            for (Isa isa : SupportedIsas()) {
              std::vector<int32_t> dots(oracle.size(), -1);
              GroupDots(isa, *m, a, 0, 0, d.out, dots.data());
              ASSERT_EQ(dots, oracle)
                  << IsaName(isa) << " " << ModeName(mode) << " bits " << bits << " group " << group
                  << " [" << d.out << "," << d.in << "]" << (m->tiles() ? " tiles" : "");
              // Row ranges starting on a block and ending inside one.
              if (d.out > 16) {
                std::vector<int32_t> part(size_t(d.out - 16) * G, -1);
                GroupDots(isa, *m, a, 0, 16, d.out, part.data());
                ASSERT_TRUE(std::equal(part.begin(), part.end(), oracle.begin() + 16 * G))
                    << IsaName(isa) << " rows from 16" << (m->tiles() ? " tiles" : "");
              }
            }
        }
}

TEST(CqKernels, SimdFloatOutputsAreBitIdenticalToScalar) {
  std::mt19937 rng(2);
  for (Mode mode : kModes)
    for (uint32_t bits : kBits)
      for (uint32_t group : kGroups)
        for (Dims d : DimsFor(group)) {
          Case c = MakeCase(d.out, d.in, group, bits, rng, mode.cb_residual);
          const uint32_t T = 5;
          std::vector<float> x = RandomVector(size_t(d.in) * T, rng);
          ActivationBatch a;
          const std::vector<float> ref = ScalarOutputs(c, x, T, d, group, mode, &a);
          for (const CqKernelMatrix* tm : RowsAndTiles(c.m))
            for (Isa isa : SupportedIsas()) {
              const CqKernelMatrix& m = *tm;
              std::string what = std::string(IsaName(isa)) + " " + ModeName(mode) + " bits " +
                                 std::to_string(bits) + " group " + std::to_string(group) + " [" +
                                 std::to_string(d.out) + "," + std::to_string(d.in) + "]" +
                                 (m.tiles() ? " tiles" : "");
              // MatVec over the whole range and over 16-aligned row splits.
              for (uint32_t parts : {1u, 2u, 3u}) {
                std::vector<float> y(size_t(T) * d.out, NAN);
                for (uint32_t t = 0; t < T; ++t)
                  for (uint32_t p = 0; p < parts; ++p) {
                    RowRange rr = RowSplit(d.out, parts, p);
                    MatVecRows(isa, m, a, t, rr.begin, rr.end, y.data() + size_t(t) * d.out);
                  }
                ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * 4))
                    << what << " parts " << parts;
              }
              // Unaligned row ranges (e.g. the 4 rows of one layer's mHC projection).
              for (uint32_t cut : {1u, 3u, 5u, 13u, 21u}) {
                if (cut >= d.out) continue;
                std::vector<float> y(size_t(T) * d.out, NAN);
                for (uint32_t t = 0; t < T; ++t) {
                  MatVecRows(isa, m, a, t, 0, cut, y.data() + size_t(t) * d.out);
                  MatVecRows(isa, m, a, t, cut, d.out, y.data() + size_t(t) * d.out);
                }
                ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), y.size() * 4))
                    << what << " cut " << cut;
                std::vector<float> ym(size_t(T) * d.out, NAN);
                MatMatRows(isa, m, a, 0, cut, ym.data(), d.out);
                MatMatRows(isa, m, a, cut, d.out, ym.data(), d.out);
                ASSERT_EQ(0, std::memcmp(ym.data(), ref.data(), ym.size() * 4))
                    << what << " matmat cut " << cut;
              }
              // MatMat (prefill) gives the same bits as MatVec (decode).
              std::vector<float> ym(size_t(T) * d.out, NAN);
              MatMatRows(isa, m, a, 0, d.out, ym.data(), d.out);
              ASSERT_EQ(0, std::memcmp(ym.data(), ref.data(), ym.size() * 4)) << what << " matmat";
            }
        }
}

// |y_kernel - y_fp32| <= sum_g norm_g * sum_i (|a_i| * cb_step/2 + |cb_i| * act_step_g/2),
// where a = the quantized activation (|a_i| <= |u_i| + act_step/2) and the steps are those
// of the mode (int8: scale; two-level: scale/128; codebook residual: cb_scale/128): the
// exact error of replacing both factors by their roundings, plus 1e-5 of the magnitude
// for float rounding (the dropped lo*q2/128^2 term is below the two-level steps). Also
// prints the observed relative L2 error for Gaussian inputs.
TEST(CqKernels, ScalarMatchesFp32DequantizeOracle) {
  std::mt19937 rng(3);
  for (Mode mode : {kModes[0], kModes[3]})
    for (uint32_t bits : kBits)
      for (uint32_t group : {32u, 128u, 512u}) {
        const uint32_t out = 24, in = 2 * group + group / 2;
        Case c = MakeCase(out, in, group, bits, rng, mode.cb_residual);
        std::vector<float> x = RandomVector(in, rng);
        ActivationBatch a;
        PrepareActivations(Isa::kScalar, x.data(), 1, in, in, group, &a, mode.act);
        std::vector<float> y(out);
        MatVecRows(Isa::kScalar, c.m, a, 0, 0, out, y.data());
        const uint32_t G = c.m.groups(), ip = c.m.in_pad();
        // Rounding steps: int8 -> 1 unit, with the residual level -> 1/128 of a unit.
        const double act_unit = mode.act == ActPrecision::kInt8x2 ? 1.0 / 128 : 1.0;
        const double isq = 1.0 / std::sqrt(double(group)),
                     cb_step = c.cb8.scale * (c.cb8.has_lo ? 1.0 / 128 : 1.0);
        double err2 = 0, ref2 = 0;
        for (uint32_t r = 0; r < out; ++r) {
          double ref = 0, bound = 0, mag = 0;
          for (uint32_t g = 0; g < G; ++g) {
            const double norm = HalfValue(c.cq.norms[size_t(r) * G + g]);
            const double act_step = a.scale(0)[g] * act_unit;
            // Dequantized weight row (codebook * norm) @ H, then dot with x.
            std::vector<double> w(group, 0.0);
            for (uint32_t i = 0; i < group; ++i) {
              double v = norm * CodeValue(c.cb, bits, c.cq.codes[size_t(r) * ip + g * group + i]);
              for (uint32_t j = 0; j < group; ++j) w[j] += v * HadamardSign(i, j) * isq;
            }
            double u_abs_sum = 0;
            for (uint32_t j = 0; j < group; ++j) {
              uint32_t k = g * group + j;
              if (k < in) ref += w[j] * x[k];
            }
            for (uint32_t i = 0; i < group; ++i) {
              double ui = 0;
              for (uint32_t j = 0; j < group && g * group + j < in; ++j)
                ui += HadamardSign(i, j) * x[g * group + j];
              ui *= isq;
              double cbi = CodeValue(c.cb, bits, c.cq.codes[size_t(r) * ip + g * group + i]);
              bound += norm * ((std::fabs(ui) + act_step / 2) * cb_step / 2 +
                               std::fabs(cbi) * act_step / 2);
              u_abs_sum += std::fabs(ui * cbi);
            }
            mag += norm * u_abs_sum;
            // The dropped lo * q2 / 128^2 term (|lo|, |q2| <= 64).
            if (mode.act == ActPrecision::kInt8x2 && c.cb8.has_lo)
              bound += norm * group * (64.0 * 64.0 / 16384.0) * c.cb8.scale * a.scale(0)[g];
          }
          EXPECT_LE(std::fabs(y[r] - ref), bound * (1 + 1e-6) + 1e-5 * mag)
              << "bits " << bits << " group " << group << " row " << r;
          err2 += (y[r] - ref) * (y[r] - ref);
          ref2 += ref * ref;
        }
        std::printf("  %s bits %u group %u: relative L2 error vs FP32 oracle %.4f%%\n",
                    ModeName(mode).c_str(), bits, group, 100 * std::sqrt(err2 / ref2));
        EXPECT_LT(std::sqrt(err2 / ref2), mode.act == ActPrecision::kInt8x2 ? 0.001 : 0.03);
      }
}

TEST(CqKernels, ZeroAndNanActivations) {
  std::mt19937 rng(4);
  Case c = MakeCase(20, 256, 128, 2, rng);
  std::vector<float> zero(256, 0.f), nan(256, 1.f);
  nan[200] = NAN;
  for (const CqKernelMatrix* m : RowsAndTiles(c.m))
    for (Isa isa : SupportedIsas()) {
      ActivationBatch a;
      std::vector<float> y(20, 1.f);
      PrepareActivations(isa, zero.data(), 1, 256, 256, 128, &a);
      MatVecRows(isa, *m, a, 0, 0, 20, y.data());
      for (float v : y) EXPECT_EQ(v, 0.f) << IsaName(isa);
      PrepareActivations(isa, nan.data(), 1, 256, 256, 128, &a);
      MatVecRows(isa, *m, a, 0, 0, 20, y.data());
      for (float v : y) EXPECT_TRUE(std::isnan(v)) << IsaName(isa);
    }
}

TEST(CqKernels, ThreadedMatVecAndMatMatEqualSingleThreaded) {
  std::mt19937 rng(5);
  Case c = MakeCase(1000, 512, 128, 2, rng);  // 128 KB of codes: above the threading threshold
  const uint32_t T = 9;
  std::vector<float> x = RandomVector(512 * T, rng);
  ActivationBatch a;
  PrepareActivations(x.data(), T, 512, 512, 128, &a);
  for (const CqKernelMatrix* m : RowsAndTiles(c.m)) {
    std::vector<float> y1(1000), y2(1000), ym(size_t(T) * 1000);
    MatMat(*m, a, ym.data(), 1000);
    for (uint32_t t = 0; t < T; ++t) {
      MatVec(*m, a, t, y1.data());
      MatVecRows(Isa::kScalar, *m, a, t, 0, 1000, y2.data());
      EXPECT_EQ(0, std::memcmp(y1.data(), y2.data(), 4000));
      EXPECT_EQ(0, std::memcmp(ym.data() + size_t(t) * 1000, y2.data(), 4000));
    }
  }
}

// Tile vector (b, u) holds row 16b+i's packed bytes 4u..4u+3 at 4i, zero past the last row;
// only 2- and 4-bit codes have tiles. Stacked matrices tile their own rows.
TEST(CqKernels, TilesHoldEachRowsUnitsSideBySide) {
  std::mt19937 rng(6);
  for (uint32_t bits : {2u, 3u, 4u, 5u})
    for (uint32_t out : {1u, 16u, 37u}) {
      Case c = MakeCase(out, 300, 64, bits, rng);
      CqKernelMatrix m = c.m;
      EXPECT_EQ(m.tiles(), nullptr);
      const bool has = m.BuildTiles();
      ASSERT_EQ(has, c.cq.code_bits() != 3) << bits;
      ASSERT_EQ(m.TileBytes() > 0, has) << bits;
      EXPECT_EQ(c.m.tiles(), nullptr);  // the copy made them, not the original
      if (!has) continue;
      const size_t row_bytes = size_t(c.cq.in_pad()) * c.cq.code_bits() / 8;
      ASSERT_EQ(m.tile_units(), row_bytes / 4);
      ASSERT_EQ(m.TileBytes(), size_t(out + 15) / 16 * row_bytes * 16);
      // The same bytes when built inside a shared buffer, after another matrix's tiles.
      auto buffer = std::shared_ptr<uint8_t>(
          static_cast<uint8_t*>(std::aligned_alloc(64, 2 * m.TileBytes())), std::free);
      std::memset(buffer.get(), 0, 2 * m.TileBytes());
      CqKernelMatrix in_buffer = c.m;
      ASSERT_TRUE(in_buffer.BuildTiles(buffer.get() + m.TileBytes(), buffer));
      buffer.reset();  // the matrix keeps it alive
      ASSERT_EQ(0, std::memcmp(in_buffer.tiles(), m.tiles(), m.TileBytes()));
      for (uint32_t b = 0; b * 16 < out; ++b)
        for (size_t u = 0; u < row_bytes / 4; ++u)
          for (uint32_t i = 0; i < 16; ++i)
            for (uint32_t k = 0; k < 4; ++k) {
              const uint32_t r = 16 * b + i;
              const uint8_t want = r < out ? c.cq.blob[r * row_bytes + 4 * u + k] : 0;
              ASSERT_EQ(m.tiles()[(b * row_bytes / 4 + u) * 64 + 4 * i + k], want)
                  << bits << " row " << r << " unit " << u;
            }
      const CqKernelMatrix::RowSlice slices[] = {{&c.m, out - 1, out}, {&c.m, 0, out}};
      CqKernelMatrix s = CqKernelMatrix::Stack(slices).value();
      ASSERT_TRUE(s.BuildTiles());
      for (size_t k = 0; k < row_bytes; ++k)  // stacked row 0 is the last row
        ASSERT_EQ(s.tiles()[k / 4 * 64 + k % 4], c.cq.blob[(out - 1) * row_bytes + k]);
    }
}

TEST(CqKernels, CreateRejectsBadShapes) {
  std::vector<uint8_t> blob(100);
  Int8Codebook cb8 = MakeInt8Codebook(OfficialCodebook(2, 128), 2).value();
  EXPECT_FALSE(CqKernelMatrix::Create(blob, 1, 128, 128, 2, cb8).ok());  // wrong size
  EXPECT_FALSE(CqKernelMatrix::Create(blob, 1, 128, 100, 2, cb8).ok());  // group
  EXPECT_FALSE(CqKernelMatrix::Create(blob, 1, 128, 128, 3, cb8).ok());  // codebook width
  std::vector<uint8_t> ok(32 + 2);
  EXPECT_TRUE(CqKernelMatrix::Create(ok, 1, 128, 128, 2, cb8).ok());
}

TEST(CqKernels, IsaSelection) {
  EXPECT_TRUE(IsaSupported(Isa::kScalar));
  EXPECT_TRUE(IsaSupported(BestIsa()));
  EXPECT_TRUE(ParseIsa("avx512").ok());
  EXPECT_FALSE(ParseIsa("sse").ok());
  Isa before = ActiveIsa();
  EXPECT_TRUE(SetActiveIsa(Isa::kScalar));
  EXPECT_EQ(ActiveIsa(), Isa::kScalar);
  EXPECT_TRUE(SetActiveIsa(before));
}

}  // namespace
}  // namespace cact::kernels
