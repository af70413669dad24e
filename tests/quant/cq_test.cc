// CQ pack/unpack, quantize and dequantize against a numpy oracle written from the spec
// (dense float32 Hadamard matmul, searchsorted + "<=", float16 norms), including padding
// of the input axis and every width.
#include "quant/cq/cq.h"

#include <gtest/gtest.h>

#include <random>

#include <nlohmann/json.hpp>

#include "cq_agreement.h"
#include "quant/cq/codebook.h"
#include "quant/cq/fp16.h"
#include "quant_test_util.h"

namespace cact {
namespace {

using testing::ReadRaw;
using testing::RunPythonOracle;
using testing::TempDir;

TEST(CqPack, KnownLayouts) {
  // 4 bits: low nibble = even column.
  const uint8_t c4[8] = {1, 2, 3, 4, 15, 0, 7, 8};
  uint8_t p4[4] = {};
  PackRow(c4, 8, 4, p4);
  EXPECT_EQ(p4[0], 0x21);
  EXPECT_EQ(p4[1], 0x43);
  EXPECT_EQ(p4[2], 0x0F);
  EXPECT_EQ(p4[3], 0x87);
  // 2 bits: index k at bits [2k, 2k+2).
  const uint8_t c2[8] = {0, 1, 2, 3, 3, 2, 1, 0};
  uint8_t p2[2] = {};
  PackRow(c2, 8, 2, p2);
  EXPECT_EQ(p2[0], 0b11100100);
  EXPECT_EQ(p2[1], 0b00011011);
  // 3 bits: eight indices OR-ed into a 24-bit word at i*3, emitted little-endian.
  const uint8_t c3[8] = {1, 2, 3, 4, 5, 6, 7, 0};
  uint32_t word = 0;
  for (int i = 0; i < 8; ++i) word |= uint32_t(c3[i]) << (3 * i);
  uint8_t p3[3] = {};
  PackRow(c3, 8, 3, p3);
  EXPECT_EQ(p3[0], word & 0xFF);
  EXPECT_EQ(p3[1], (word >> 8) & 0xFF);
  EXPECT_EQ(p3[2], (word >> 16) & 0xFF);
  // Ternary (record bits 5): trits 0,1,2 -> crumbs 3,0,1.
  const uint8_t t[4] = {0, 1, 2, 0};
  uint8_t pt = 0;
  PackRow(t, 4, 5, &pt);
  EXPECT_EQ(pt, 0b11010011);
}

TEST(CqPack, RoundTripsEveryWidth) {
  std::mt19937 rng(3);
  for (uint32_t bits : {2u, 3u, 4u, 5u}) {
    const uint32_t levels = FindCqType(bits)->levels;
    for (uint32_t n : {8u, 64u, 128u, 384u, 1024u}) {
      std::vector<uint8_t> codes(n), back(n);
      for (uint8_t& c : codes) c = uint8_t(rng() % levels);
      const uint32_t width = CqCodeBits(bits);
      std::vector<uint8_t> packed(n * width / 8 + 1, 0xEE);
      PackRow(codes.data(), n, bits, packed.data());
      EXPECT_EQ(packed[n * width / 8], 0xEE) << "wrote past the row";
      UnpackRow(packed.data(), n, bits, back.data());
      EXPECT_EQ(codes, back) << "bits " << bits << " n " << n;
      // Every byte pattern unpacks and repacks to itself (except ternary crumb 2, no trit).
      if (bits != kTernaryBits) {
        std::vector<uint8_t> raw(n * width / 8), again(raw.size());
        for (uint8_t& b : raw) b = uint8_t(rng());
        UnpackRow(raw.data(), n, bits, back.data());
        PackRow(back.data(), n, bits, again.data());
        EXPECT_EQ(raw, again);
      }
    }
  }
}

TEST(CqPack, BlobLayoutIsCodesThenNorms) {
  CqShape s{3, 200, 128, 3};
  EXPECT_EQ(s.in_pad(), 256u);
  EXPECT_EQ(s.groups(), 2u);
  EXPECT_EQ(s.row_code_bytes(), 96u);
  EXPECT_EQ(s.blob_bytes(), 3u * 96 + 3 * 2 * 2);
  CqMatrix m;
  m.shape = s;
  m.codes.resize(3 * 256);
  for (size_t i = 0; i < m.codes.size(); ++i) m.codes[i] = uint8_t(i % 8);
  m.norms = {0x3C00, 0x4000, 0x0001, 0x7BFF, 0x8000, 0x1234};
  std::vector<uint8_t> blob = PackBlob(m);
  ASSERT_EQ(blob.size(), s.blob_bytes());
  EXPECT_EQ(blob[288], 0x00);
  EXPECT_EQ(blob[289], 0x3C);
  CqMatrix back = UnpackBlob(blob, s);
  EXPECT_EQ(back.codes, m.codes);
  EXPECT_EQ(back.norms, m.norms);
}

TEST(CqDequantize, ZeroNormAndInvalidTernaryCrumbAreSafe) {
  CqShape s{2, 96, 128, 5};
  std::vector<uint8_t> blob(s.blob_bytes(), 0xAA);  // crumb 2 everywhere: not a trit
  std::vector<float> cb = CqCodebook(5, 128), out(2 * 96, 1.0f);
  DequantizeBlob(blob, s, cb, out.data());
  for (float v : out) EXPECT_EQ(v, 0.0f);
}

struct OracleCase {
  uint32_t out, in, group, bits;
};

TEST(CqQuantize, MatchesNumpyOracleWithPadding) {
  const std::vector<OracleCase> cases = {
      {37, 300, 128, 2}, {20, 24, 128, 2},  {64, 256, 64, 3}, {33, 128, 128, 4},
      {16, 96, 128, 5},  {48, 640, 256, 4}, {8, 512, 32, 2},  {6, 1000, 512, 3},
  };
  TempDir dir;
  std::string list;
  for (const OracleCase& c : cases)
    list += "(" + std::to_string(c.out) + "," + std::to_string(c.in) + "," +
            std::to_string(c.group) + "," + std::to_string(c.bits) + "),";
  const std::string fixture = testing::Fixture("tiny", "codebooks.json");
  ASSERT_TRUE(RunPythonOracle(dir, R"(
import json, struct
import numpy as np
fixture = json.load(open(')" + fixture +
                                       R"('))
books = fixture['codebooks']
def codebook(bits, g):
    key = 'bits%s_group%d' % ('1.58' if bits == 5 else str(bits), g)
    if key not in books:  # the exporter's formula on the official unit levels
        return (np.array([float(v) for v in fixture['unit_lloyd_max_float64'][str(bits)]]) / np.sqrt(g)).astype(np.float32)
    return np.array([struct.unpack('<f', struct.pack('<I', int(h, 16)))[0] for h in books[key]['hex']], np.float32)
def hadamard(g):
    h = np.ones((1, 1), np.float32)
    while h.shape[0] < g:
        h = np.block([[h, h], [h, -h]])
    return (h / np.sqrt(g)).astype(np.float32)
rs = np.random.RandomState(99)
for i, (out, inn, g, bits) in enumerate([)" +
                                       list + R"(]):
    w = (rs.randn(out, inn) * rs.uniform(0.01, 3.0, size=(out, 1))).astype(np.float32)
    w[0, :] = 0.0                      # an all-zero row: norm 0, unit 0
    w[1, : min(inn, 5)] = [1e-30, -2e-30, 3e-30, 0, 1e-30][: min(inn, 5)]  # tiny values
    w.tofile('w%d.bin' % i)
    cb = codebook(bits, g)
    pad = (-inn) % g
    wp = np.pad(w, ((0, 0), (0, pad)))
    grp = wp.reshape(out, -1, g)
    rot = grp @ hadamard(g)
    norm = np.sqrt((rot ** 2).sum(-1, keepdims=True))
    unit = (rot / np.maximum(norm, 1e-12)).reshape(-1)
    pos = np.clip(np.searchsorted(cb, unit), 1, len(cb) - 1)
    idx = np.where(np.abs(unit - cb[pos - 1]) <= np.abs(unit - cb[pos]), pos - 1, pos)
    idx.astype(np.uint8).tofile('codes%d.bin' % i)
    norm[:, :, 0].astype(np.float16).tofile('norms%d.bin' % i)
)"));
  for (size_t i = 0; i < cases.size(); ++i) {
    const OracleCase& c = cases[i];
    SCOPED_TRACE("case " + std::to_string(i) + ": [" + std::to_string(c.out) + "," +
                 std::to_string(c.in) + "] g" + std::to_string(c.group) + " bits " +
                 std::to_string(c.bits));
    std::vector<float> w = ReadRaw<float>(dir / ("w" + std::to_string(i) + ".bin"));
    std::vector<uint8_t> want_codes =
        ReadRaw<uint8_t>(dir / ("codes" + std::to_string(i) + ".bin"));
    std::vector<uint16_t> want_norms =
        ReadRaw<uint16_t>(dir / ("norms" + std::to_string(i) + ".bin"));
    CqShape s{c.out, c.in, c.group, c.bits};
    ASSERT_EQ(w.size(), uint64_t(c.out) * c.in);
    ASSERT_EQ(want_codes.size(), uint64_t(c.out) * s.in_pad());
    ASSERT_EQ(want_norms.size(), uint64_t(c.out) * s.groups());
    std::vector<float> cb = CqCodebook(c.bits, c.group);
    CqMatrix m = QuantizeMatrix(w.data(), s, cb);
    testing::Agreement a =
        testing::CompareQuantizations(w.data(), s, cb, m.codes, want_codes, m.norms, want_norms);
    // The oracle's dense matmul rounds differently from the FWHT: codes may differ only at
    // near-ties (distance difference at float32 rounding level), norms by at most 1 ulp.
    EXPECT_GE(a.code_fraction(), 0.9999) << testing::Describe(a);
    EXPECT_LT(a.max_margin, 1e-6) << testing::Describe(a);
    EXPECT_EQ(a.norms_within_1ulp, a.norms) << testing::Describe(a);
    if (!a.disagreements.empty()) std::printf("%s\n", testing::Describe(a).c_str());
    // The exporter-order rotation evaluates w @ H exactly as numpy's matmul on the
    // reference BLAS (Debian libblas3, what this python3 uses): identical codes and norms.
    CqMatrix exact = QuantizeMatrix(w.data(), s, cb, CqRotation::kExporter);
    EXPECT_EQ(exact.codes, want_codes);
    EXPECT_EQ(exact.norms, want_norms);
    // The zero row: norm 0, every code the entry nearest 0 under the tie rule.
    for (uint32_t gi = 0; gi < s.groups(); ++gi) EXPECT_EQ(m.norms[gi], 0);

    // Dequantization against two scalar references of (cb[idx] * norm) @ H: the exact
    // value (double) and the reference BLAS order (sequential float32 sum of rounded
    // products, what the official reader computes).
    std::vector<uint8_t> blob = PackBlob(m);
    ASSERT_EQ(blob.size(), s.blob_bytes());
    std::vector<float> deq(w.size()), fast(w.size());
    DequantizeBlob(blob, s, cb, deq.data());
    DequantizeBlobFwht(blob, s, cb, fast.data());
    const float h = 1.0f / float(std::sqrt(double(c.group)));
    double max_abs = 0, max_err_fast = 0, max_err_exporter = 0;
    for (uint32_t r = 0; r < c.out; ++r) {
      for (uint32_t gi = 0; gi < s.groups(); ++gi) {
        const float norm = HalfToFloat(m.norms[r * s.groups() + gi]);
        for (uint32_t k = 0; k < c.group; ++k) {
          uint32_t col = gi * c.group + k;
          if (col >= c.in) continue;
          double exact = 0;
          float sequential = 0;
          for (uint32_t j = 0; j < c.group; ++j) {
            float v = cb[m.codes[uint64_t(r) * s.in_pad() + gi * c.group + j]] * norm;
            bool minus = __builtin_popcount(j & k) & 1;
            exact += minus ? -double(v) : double(v);
            sequential += v * (minus ? -h : h);
          }
          exact /= std::sqrt(double(c.group));
          const uint64_t at = uint64_t(r) * c.in + col;
          ASSERT_EQ(deq[at], sequential) << "row " << r << " col " << col;
          max_abs = std::max(max_abs, std::fabs(exact));
          max_err_fast = std::max(max_err_fast, std::fabs(exact - fast[at]));
          max_err_exporter = std::max(max_err_exporter, std::fabs(exact - deq[at]));
        }
      }
    }
    // FWHT: log2(g) float32 butterfly roundings, well under 1e-6 of the largest value;
    // the sequential sum of g terms is allowed twice that.
    EXPECT_LE(max_err_fast, 1e-6 * std::max(max_abs, 1e-30))
        << "max err " << max_err_fast << " max |w| " << max_abs;
    EXPECT_LE(max_err_exporter, 2e-6 * std::max(max_abs, 1e-30)) << "max err " << max_err_exporter;
    std::vector<float> row(c.in), row_fast(c.in);
    DequantizeRow(blob, s, cb, c.out - 1, row.data());
    DequantizeRowFwht(blob, s, cb, c.out - 1, row_fast.data());
    for (uint32_t k = 0; k < c.in; ++k) {
      ASSERT_EQ(row[k], deq[uint64_t(c.out - 1) * c.in + k]);
      ASSERT_EQ(row_fast[k], fast[uint64_t(c.out - 1) * c.in + k]);
    }
  }
}

}  // namespace
}  // namespace cact
