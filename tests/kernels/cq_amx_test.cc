// The AMX-INT8 prefill kernel (cq_amx_impl.h): the tile emulator follows the documented
// tdpbssd / load / store semantics and refuses what the hardware refuses; the kernel run
// on the emulator (internal::MatMatAmxEmulated) gives the scalar kernel's float outputs bit
// for bit (widths, groups, odd rows and tokens, row ranges, precision modes, zero and NaN
// groups); on a CPU with AMX the hardware instantiation (Isa::kAmx) does too, elsewhere
// that test is skipped; CACT_KERNEL=amx without AMX falls back with the usual warning.
#include <gtest/gtest.h>
#include <omp.h>

#include <cmath>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <string>

#include "engine/kernels/amx_tiles.h"
#include "engine/kernels/cq_kernels.h"
#include "engine/kernels/kernel_table.h"
#include "kernel_test_util.h"

namespace cact::kernels {
namespace {

using internal::TileConfig;
using internal::TileConfigError;
using internal::TileEmulator;
using testing::Case;
using testing::kModes;
using testing::MakeCase;
using testing::MakeRandomCq;
using testing::Mode;
using testing::OfficialCodebook;
using testing::RandomCq;
using testing::RandomVector;
using testing::RowsAndTiles;

// ------------------------------------------------------------------ the emulator

TileConfig Config3(uint32_t m, uint32_t n_bytes, uint32_t k_bytes) {  // C = 0, A = 1, B = 2
  TileConfig c{};
  c.palette_id = 1;
  c.rows[0] = uint8_t(m);
  c.colsb[0] = uint16_t(n_bytes);
  c.rows[1] = uint8_t(m);
  c.colsb[1] = uint16_t(k_bytes);
  c.rows[2] = uint8_t(k_bytes / 4);
  c.colsb[2] = uint16_t(n_bytes);
  return c;
}

TEST(AmxTileEmulator, DotProductMatchesANaiveLoop) {
  std::mt19937 rng(11);
  for (uint32_t m : {1u, 5u, 16u})
    for (uint32_t n_bytes : {4u, 20u, 64u})
      for (uint32_t k_bytes : {4u, 8u, 32u, 64u}) {
        // Operands at byte strides wider than their rows, with junk between the rows.
        const size_t sa = 80, sb = 72, sc = 96;
        std::vector<int8_t> a(16 * sa), b(16 * sb);
        std::vector<int32_t> c(16 * sc / 4);
        for (auto& v : a) v = int8_t(rng());
        for (auto& v : b) v = int8_t(rng());
        a[0] = b[0] = -128;  // the extremes multiply exactly
        for (auto& v : c) v = int32_t(rng());
        c[0] = INT32_MAX;  // wraps mod 2^32 like the hardware
        TileEmulator emu;
        emu.LoadConfig(Config3(m, n_bytes, k_bytes));
        emu.Load(0, c.data(), sc);
        emu.Load(1, a.data(), sa);
        emu.Load(2, b.data(), sb);
        emu.DotBssd(0, 1, 2);
        std::vector<int32_t> out(16 * 16, 12345);
        emu.Store(0, out.data(), 64);
        for (uint32_t i = 0; i < 16; ++i)
          for (uint32_t j = 0; j < 16; ++j) {
            if (i >= m || j >= n_bytes / 4) {  // outside the tile: untouched
              EXPECT_EQ(out[i * 16 + j], 12345);
              continue;
            }
            uint32_t want = uint32_t(c[i * sc / 4 + j]);
            for (uint32_t k = 0; k < k_bytes / 4; ++k)
              for (uint32_t q = 0; q < 4; ++q)
                want += uint32_t(int32_t(a[i * sa + 4 * k + q]) * int32_t(b[k * sb + 4 * j + q]));
            ASSERT_EQ(uint32_t(out[i * 16 + j]), want)
                << "m " << m << " n " << n_bytes << " k " << k_bytes << " at " << i << "," << j;
          }
      }
}

TEST(AmxTileEmulator, ZeroLoadStoreAndReconfigure) {
  TileEmulator emu;
  TileConfig cfg = Config3(3, 8, 4);
  emu.LoadConfig(cfg);
  std::vector<uint8_t> src(64 * 16, 7), dst(64 * 16, 0);
  emu.Load(0, src.data(), 64);
  emu.Store(0, dst.data(), 10);  // 3 rows of 8 bytes at a 10-byte stride
  for (size_t i = 0; i < dst.size(); ++i) EXPECT_EQ(dst[i], i < 30 && i % 10 < 8 ? 7 : 0) << i;
  emu.Zero(0);
  emu.Store(0, dst.data(), 10);
  for (uint8_t v : dst) EXPECT_EQ(v, 0);
  emu.Load(0, src.data(), 64);
  emu.LoadConfig(cfg);  // a configuration load zeroes every tile
  emu.Store(0, dst.data(), 10);
  for (uint8_t v : dst) EXPECT_EQ(v, 0);
}

TEST(AmxTileEmulator, RefusesWhatTheHardwareRefuses) {
  EXPECT_EQ(TileConfigError(Config3(16, 64, 64)), nullptr);
  auto bad = [](auto edit) {
    TileConfig c = Config3(16, 64, 64);
    edit(c);
    return TileConfigError(c) != nullptr;
  };
  EXPECT_TRUE(bad([](TileConfig& c) { c.palette_id = 0; }));
  EXPECT_TRUE(bad([](TileConfig& c) { c.palette_id = 2; }));
  EXPECT_TRUE(bad([](TileConfig& c) { c.start_row = 1; }));
  EXPECT_TRUE(bad([](TileConfig& c) { c.reserved[3] = 1; }));
  EXPECT_TRUE(bad([](TileConfig& c) { c.rows[0] = 17; }));
  EXPECT_TRUE(bad([](TileConfig& c) { c.colsb[1] = 68; }));
  EXPECT_TRUE(bad([](TileConfig& c) { c.colsb[1] = 6; }));
  EXPECT_TRUE(bad([](TileConfig& c) { c.colsb[0] = 0; }));  // rows without columns
  EXPECT_TRUE(bad([](TileConfig& c) { c.rows[4] = 0, c.colsb[4] = 4; }));
  EXPECT_TRUE(bad([](TileConfig& c) { c.rows[8] = 1, c.colsb[8] = 4; }));  // no tile 8

  GTEST_FLAG_SET(death_test_style, "threadsafe");
  TileConfig bad_rows = Config3(16, 64, 64);
  bad_rows.rows[1] = 17;
  EXPECT_DEATH(TileEmulator().LoadConfig(bad_rows), "more than 16 rows");
  std::vector<int8_t> buf(1024);
  EXPECT_DEATH(TileEmulator().Load(0, buf.data(), 64), "not configured");
  EXPECT_DEATH(
      {
        TileEmulator emu;
        emu.LoadConfig(Config3(16, 64, 64));
        emu.DotBssd(0, 0, 2);
      },
      "distinct");
  EXPECT_DEATH(
      {
        TileEmulator emu;
        TileConfig c = Config3(16, 64, 32);
        c.rows[2] = 4;  // B has 4 rows for K = 8 dwords
        emu.LoadConfig(c);
        emu.DotBssd(0, 1, 2);
      },
      "B rows");
  EXPECT_DEATH(
      {
        TileEmulator emu;
        TileConfig c = Config3(16, 64, 64);
        c.rows[1] = 8;  // A has 8 rows for a 16-row C
        emu.LoadConfig(c);
        emu.DotBssd(0, 1, 2);
      },
      "A rows");
  EXPECT_DEATH(
      {
        TileEmulator emu;
        emu.LoadConfig(Config3(16, 64, 64));
        emu.Release();
        emu.Zero(0);
      },
      "not configured");
}

// ------------------------------------------------------------------ the kernel

using MatMatFn = std::function<void(const CqKernelMatrix&, const ActivationBatch&, uint32_t,
                                    uint32_t, float*, size_t)>;

// The scalar kernel's outputs, token by token.
std::vector<float> ScalarOutputs(const CqKernelMatrix& m, const ActivationBatch& a) {
  std::vector<float> ref(size_t(a.tokens()) * m.out());
  for (uint32_t t = 0; t < a.tokens(); ++t)
    MatVecRows(Isa::kScalar, m, a, t, 0, m.out(), ref.data() + size_t(t) * m.out());
  return ref;
}

// `matmat` over all rows, and over row ranges not starting at 0 when `cuts`: every output
// equals the scalar one bit for bit, and nothing outside the range is written (y has a
// guard after the last token).
void ExpectScalarBitsOf(const MatMatFn& matmat, const CqKernelMatrix& m, const ActivationBatch& a,
                        const std::string& what, bool cuts) {
  const uint32_t out = m.out(), T = a.tokens();
  const size_t n = size_t(T) * out, guard = 32;
  const std::vector<float> ref = ScalarOutputs(m, a);
  std::vector<float> y(n + guard, NAN);
  matmat(m, a, 0, out, y.data(), out);
  ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), n * 4)) << what;
  for (size_t i = n; i < y.size(); ++i) ASSERT_TRUE(std::isnan(y[i])) << what << " guard";
  if (!cuts) return;
  for (uint32_t cut : {1u, 15u, 16u, 17u}) {
    if (cut >= out) continue;
    std::fill(y.begin(), y.end(), NAN);
    matmat(m, a, cut, out, y.data(), out);
    for (size_t i = 0; i < y.size(); ++i)  // only rows [cut, out) of each token written
      ASSERT_TRUE((i < n && i % out >= cut) || std::isnan(y[i])) << what << " cut " << cut;
    matmat(m, a, 0, cut, y.data(), out);
    ASSERT_EQ(0, std::memcmp(y.data(), ref.data(), n * 4)) << what << " cut " << cut;
    for (size_t i = n; i < y.size(); ++i) ASSERT_TRUE(std::isnan(y[i])) << what << " guard";
  }
}

// From the rows, and from the tiles where the width has them.
void ExpectScalarBits(const MatMatFn& matmat, const CqKernelMatrix& m, const ActivationBatch& a,
                      const std::string& what, bool cuts) {
  for (const CqKernelMatrix* tm : RowsAndTiles(m)) {
    ExpectScalarBitsOf(matmat, *tm, a, what + (tm->tiles() ? " tiles" : ""), cuts);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// One OpenMP thread while it lives: the many small batches prepare faster unthreaded (the
// team's spinning was three quarters of this test's time on a busy 2-core machine).
class OneThread {
 public:
  OneThread() : before_(omp_get_max_threads()) { omp_set_num_threads(1); }
  ~OneThread() { omp_set_num_threads(before_); }

 private:
  int before_;
};

// Every width (3-bit through the VBMI fallback), group and mode; rows 1, 15, 17, 33 with
// inputs that are not a multiple of the group; 1..40 tokens (partial and full 16-token
// blocks); row ranges not starting at 0.
void ExpectKernelMatchesScalar(const MatMatFn& matmat) {
  OneThread one_thread;
  std::mt19937 rng(21);
  for (Mode mode : kModes)
    for (uint32_t bits : {2u, 4u, kTernaryBits, 3u})
      for (uint32_t group : {32u, 64u, 128u, 256u, 512u})
        for (uint32_t out : {1u, 15u, 17u, 33u}) {
          const uint32_t in = out % 2 ? 3 * group - 5 : 2 * group + 1;
          Case c = MakeCase(out, in, group, bits, rng, mode.cb_residual);
          for (uint32_t T : {1u, 5u, 16u, 17u, 33u, 40u}) {
            if (out == 1 && T > 17) continue;
            std::vector<float> x = RandomVector(size_t(in) * T, rng);
            ActivationBatch a;
            PrepareActivations(Isa::kScalar, x.data(), T, in, in, group, &a, mode.act);
            const std::string what =
                std::string(mode.act == ActPrecision::kInt8x2 ? "int8x2" : "int8") +
                (mode.cb_residual ? "+cblo" : "") + " bits " + std::to_string(bits) + " group " +
                std::to_string(group) + " [" + std::to_string(out) + "," + std::to_string(in) +
                "] tokens " + std::to_string(T);
            ExpectScalarBits(matmat, c.m, a, what, T == 17 || T == 40);
            if (::testing::Test::HasFatalFailure()) return;
          }
        }
  // A large matrix: many panel pairs, a partial last panel.
  for (Mode mode : {kModes[0], kModes[3]})
    for (uint32_t bits : {2u, 4u}) {
      Case c = MakeCase(1000, 512, 128, bits, rng, mode.cb_residual);
      std::vector<float> x = RandomVector(512 * 17, rng);
      ActivationBatch a;
      PrepareActivations(Isa::kScalar, x.data(), 17, 512, 512, 128, &a, mode.act);
      ExpectScalarBits(matmat, c.m, a, "1000 rows bits " + std::to_string(bits), false);
      if (::testing::Test::HasFatalFailure()) return;
    }
  // A stack of row ranges of three matrices (rows read through the stack's row tables).
  for (uint32_t bits : {2u, 4u}) {
    const uint32_t group = 64, in = 4 * group + 7;
    const Int8Codebook cb8 =
        MakeInt8Codebook(OfficialCodebook(bits, group), CqCodeBits(bits), true).value();
    std::vector<RandomCq> cqs;
    std::vector<CqKernelMatrix> parts;
    for (uint32_t rows : {12u, 9u, 40u}) cqs.push_back(MakeRandomCq(rows, in, group, bits, rng));
    for (const RandomCq& cq : cqs)
      parts.push_back(
          CqKernelMatrix::Create(cq.blob, cq.out, in, group, cq.code_bits(), cb8).value());
    const CqKernelMatrix::RowSlice slices[] = {
        {&parts[0], 4, 8}, {&parts[1], 0, 4}, {&parts[2], 3, 32}, {&parts[0], 11, 12}};
    const CqKernelMatrix s = CqKernelMatrix::Stack(slices).value();
    std::vector<float> x = RandomVector(size_t(in) * 19, rng);
    ActivationBatch a;
    PrepareActivations(Isa::kScalar, x.data(), 19, in, in, group, &a, ActPrecision::kInt8x2);
    ExpectScalarBits(matmat, s, a, "stack bits " + std::to_string(bits), true);
    if (::testing::Test::HasFatalFailure()) return;
  }
}

// A zero group gives 0, a group with a NaN gives NaN, like every kernel.
void ExpectZeroAndNan(const MatMatFn& matmat) {
  std::mt19937 rng(4);
  for (uint32_t bits : {2u, 4u}) {
    Case c = MakeCase(20, 256, 128, bits, rng, false);
    std::vector<float> x(3 * 256, 0.f);  // token 0 zero, token 1 with a NaN, token 2 random
    for (int k = 0; k < 256; ++k) x[256 + k] = 1.f;
    x[256 + 200] = NAN;
    std::vector<float> r = RandomVector(256, rng);
    std::copy(r.begin(), r.end(), x.begin() + 512);
    ActivationBatch a;
    PrepareActivations(Isa::kScalar, x.data(), 3, 256, 256, 128, &a);
    std::vector<float> y(3 * 20, 1.f);
    matmat(c.m, a, 0, 20, y.data(), 20);
    const std::vector<float> ref = ScalarOutputs(c.m, a);
    for (int i = 0; i < 20; ++i) {
      EXPECT_EQ(y[i], 0.f) << "bits " << bits;
      EXPECT_TRUE(std::isnan(y[20 + i])) << "bits " << bits;
    }
    EXPECT_EQ(0, std::memcmp(y.data() + 40, ref.data() + 40, 20 * 4)) << "bits " << bits;
  }
}

const MatMatFn kEmulated = internal::MatMatAmxEmulated;
const MatMatFn kHardware = [](const CqKernelMatrix& m, const ActivationBatch& a, uint32_t b,
                              uint32_t e, float* y,
                              size_t ys) { MatMatRows(Isa::kAmx, m, a, b, e, y, ys); };

TEST(AmxKernel, EmulatedIsBitIdenticalToScalar) {
  if (!IsaSupported(Isa::kAvx512Vbmi)) GTEST_SKIP() << "needs AVX-512 VBMI (the code panels)";
  ExpectKernelMatchesScalar(kEmulated);
}

TEST(AmxKernel, EmulatedZeroAndNanActivations) {
  if (!IsaSupported(Isa::kAvx512Vbmi)) GTEST_SKIP() << "needs AVX-512 VBMI (the code panels)";
  ExpectZeroAndNan(kEmulated);
}

TEST(AmxKernel, HardwareIsBitIdenticalToScalar) {
  if (!IsaSupported(Isa::kAmx))
    GTEST_SKIP() << "AMX-INT8 is absent on this CPU (or not granted by the OS): the hardware "
                    "tile kernel is compiled but not run here";
  ExpectKernelMatchesScalar(kHardware);
  ExpectZeroAndNan(kHardware);
}

TEST(AmxKernel, IsOptInAndFallsBackWithoutAmx) {
  EXPECT_NE(BestIsa(), Isa::kAmx);
  EXPECT_EQ(ParseIsa("amx").value(), Isa::kAmx);
  EXPECT_STREQ(IsaName(Isa::kAmx), "amx");
  EXPECT_TRUE(IsAvx512(Isa::kAmx));  // the AVX-512 fast ops and decode
  EXPECT_TRUE(!IsaSupported(Isa::kAmx) || IsaSupported(Isa::kAvx512Vbmi));
  const Isa before = ActiveIsa();
  EXPECT_EQ(SetActiveIsa(Isa::kAmx), IsaSupported(Isa::kAmx));
  SetActiveIsa(before);
}

// CACT_KERNEL is read once per process, by the first ActiveIsa(): check it in a fresh one
// (a threadsafe death test re-runs this test, which calls ActiveIsa() only in the child).
TEST(AmxKernel, CactKernelAmxFallsBackWithTheWarningWithoutAmx) {
  GTEST_FLAG_SET(death_test_style, "threadsafe");
  const bool amx = IsaSupported(Isa::kAmx);
  const std::string best = IsaName(BestIsa());
  EXPECT_EXIT(
      {
        setenv("CACT_KERNEL", "amx", 1);
        const Isa isa = ActiveIsa();
        std::exit(isa == (amx ? Isa::kAmx : BestIsa()) ? 0 : 1);
      },
      ::testing::ExitedWithCode(0),
      amx ? std::string() : "CACT_KERNEL=amx is not supported by this CPU; using " + best);
}

}  // namespace
}  // namespace cact::kernels
