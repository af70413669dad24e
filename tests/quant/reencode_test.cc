// Group-level re-encoding of edited CQ matrices: unchanged groups keep their bytes, the fit
// is a fixed point on dequantized values, an edit touches only its own group, the fit is at
// least as close to the edited values as the exporter's rule, and far groups take the
// exporter's bytes. Every width (ternary included), every group size, padded rows.
#include "quant/cq/reencode.h"

#include <gtest/gtest.h>

#include <cmath>
#include <random>

#include "quant/cq/codebook.h"
#include "quant/cq/fp16.h"
#include "quant/cq/fwht.h"

namespace cact {
namespace {

struct Case {
  CqShape shape;
  std::vector<float> codebook, weights, base_values;
  std::vector<uint8_t> base_blob;
};

Case MakeCase(uint32_t bits, uint32_t group, uint32_t out, uint32_t in, uint32_t seed) {
  Case c;
  c.shape = CqShape{out, in, group, bits};
  c.codebook = CqCodebook(bits, group);
  std::mt19937 rng(seed);
  std::normal_distribution<float> normal(0.0f, 0.05f);
  c.weights.resize(size_t(out) * in);
  for (float& v : c.weights) v = normal(rng);
  c.base_blob = PackBlob(QuantizeMatrix(c.weights.data(), c.shape, c.codebook));
  c.base_values.resize(c.weights.size());
  DequantizeBlob(c.base_blob, c.shape, c.codebook, c.base_values.data());
  return c;
}

// Widths x group sizes, each with a padded last group (in not a multiple of the group).
std::vector<Case> AllCases() {
  std::vector<Case> cases;
  uint32_t seed = 1;
  for (uint32_t bits : {2u, 3u, 4u, 5u})
    for (uint32_t group : {32u, 64u, 128u, 256u, 512u})
      cases.push_back(MakeCase(bits, group, 3, 2 * group + group / 2 + 3, seed++));
  return cases;
}

std::string Name(const Case& c) {
  return "bits " + std::to_string(c.shape.bits) + " group " + std::to_string(c.shape.group);
}

ReencodeResult Reencode(const Case& c, const std::vector<float>& edited, ReencodeOptions o = {}) {
  return ReencodeMatrix(c.base_blob, c.shape, c.codebook, edited.data(), c.base_values.data(), o);
}

uint64_t Groups(const Case& c) { return uint64_t(c.shape.out) * c.shape.groups(); }

// The packed code bytes and the norm bytes of group q.
std::vector<std::pair<uint64_t, uint64_t>> GroupByteRanges(const CqShape& s, uint64_t q) {
  const uint64_t row = q / s.groups(), gi = q % s.groups();
  const uint64_t bits_per_group = uint64_t(s.group) * s.code_bits();  // a multiple of 8
  const uint64_t code0 = row * s.row_code_bytes() + gi * bits_per_group / 8;
  return {{code0, code0 + bits_per_group / 8}, {s.code_bytes() + 2 * q, s.code_bytes() + 2 * q + 2}};
}

double SquaredError(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) s += (double(a[i]) - b[i]) * (double(a[i]) - b[i]);
  return s;
}

TEST(Reencode, UnchangedValuesKeepEveryByte) {
  for (const Case& c : AllCases()) {
    SCOPED_TRACE(Name(c));
    const ReencodeResult r = Reencode(c, c.base_values);
    EXPECT_EQ(r.blob, c.base_blob);
    EXPECT_EQ(r.kept, Groups(c));
    EXPECT_EQ(r.reencoded + r.quantized, 0u);
    EXPECT_EQ(r.edit_norm, 0.0);
  }
}

TEST(Reencode, TheFitIsAFixedPointOnDequantizedValues) {
  // No group kept by comparison: every group is refitted from its dequantized values and
  // must give back its own codes and norm, padded groups included.
  for (CqRotation rotation : {CqRotation::kFwht, CqRotation::kExporter}) {
    for (const Case& c : AllCases()) {
      SCOPED_TRACE(Name(c) + (rotation == CqRotation::kFwht ? " fwht" : " exporter"));
      ReencodeOptions o;
      o.keep_tolerance = -1;
      o.rotation = rotation;
      const ReencodeResult r = Reencode(c, c.base_values, o);
      EXPECT_EQ(r.reencoded, Groups(c));
      EXPECT_EQ(r.blob, c.base_blob);
    }
  }
}

TEST(Reencode, TheExporterRuleIsNotAFixedPoint) {
  // Why the fit exists: quantizing dequantized values again by the exporter's rule moves
  // the norms (2 bits: the codebook vectors' length is ~0.94).
  const Case c = MakeCase(2, 128, 4, 512, 7);
  const std::vector<uint8_t> again =
      PackBlob(QuantizeMatrix(c.base_values.data(), c.shape, c.codebook));
  const uint64_t norms = c.shape.code_bytes();
  EXPECT_NE(std::vector<uint8_t>(again.begin() + norms, again.end()),
            std::vector<uint8_t>(c.base_blob.begin() + norms, c.base_blob.end()));
}

TEST(Reencode, AOneElementEditChangesOnlyItsGroup) {
  // A small edit (0.2 sigma) may be below what the group's bytes can express (its part along
  // the group's own direction is the only one a norm change carries); a large one (10 sigma)
  // flips codes. Either way no other group's bytes move, and the result is never further
  // from the edited values than the base.
  for (const Case& c : AllCases()) {
    for (float size : {0.01f, 0.5f})
    // One element in a full group and one in the padded last group, separately.
    for (uint32_t col : {c.shape.group + 5, c.shape.in - 1}) {
      SCOPED_TRACE(Name(c) + " column " + std::to_string(col) + " edit " + std::to_string(size));
      const uint32_t row = 1;
      std::vector<float> edited = c.base_values;
      edited[size_t(row) * c.shape.in + col] += size;
      const ReencodeResult r = Reencode(c, edited);
      EXPECT_EQ(r.kept, Groups(c) - 1);
      EXPECT_EQ(r.reencoded, 1u);
      const uint64_t q = uint64_t(row) * c.shape.groups() + col / c.shape.group;
      std::vector<uint8_t> outside = r.blob, base_outside = c.base_blob;
      for (auto [begin, end] : GroupByteRanges(c.shape, q))
        for (uint64_t i = begin; i < end; ++i) outside[i] = base_outside[i] = 0;
      EXPECT_EQ(outside, base_outside);
      EXPECT_LE(r.error_norm, r.edit_norm);
      if (size == 0.5f) {
        EXPECT_NE(r.blob, c.base_blob);
        EXPECT_LT(r.error_norm, r.edit_norm);  // closer to the edit than the base was
      }
    }
  }
}

TEST(Reencode, TheFitIsAtLeastAsCloseAsTheExporterRule) {
  // Small and large edits of every group: the result is at least as close to the edited
  // values as quantizing them by the exporter's rule (which also moves every norm).
  std::mt19937 rng(11);
  for (const Case& c : AllCases()) {
    for (float size : {1e-3f, 1e-1f}) {
      SCOPED_TRACE(Name(c) + " edit " + std::to_string(size));
      std::normal_distribution<float> noise(0.0f, 0.05f * size);
      std::vector<float> edited = c.base_values;
      for (float& v : edited) v += noise(rng);
      const ReencodeResult r = Reencode(c, edited);
      EXPECT_EQ(r.reencoded, Groups(c));
      std::vector<float> exporter(edited.size());
      DequantizeBlob(PackBlob(QuantizeMatrix(edited.data(), c.shape, c.codebook)), c.shape,
                     c.codebook, exporter.data());
      EXPECT_LE(r.error_norm * r.error_norm, SquaredError(exporter, edited));
      // A small edit: the exporter's rule moves the tensor far more than the edit did.
      if (size == 1e-3f) {
        EXPECT_LT(r.survived(), 1.5);
        EXPECT_GT(std::sqrt(SquaredError(exporter, c.base_values)) / r.edit_norm, 5.0);
      }
    }
  }
}

TEST(Reencode, NormsAreTheLeastSquaresFitOfTheirCodes) {
  // Plain double-precision reference on full groups: the stored norm is the FP16 rounding
  // of <r, cb[codes]> / |cb[codes]|^2 for the group's rotated edited values r (within one
  // FP16 step: the reference rotates with the dense matrix in double).
  const Case c = MakeCase(4, 64, 5, 256, 21);
  std::mt19937 rng(5);
  std::normal_distribution<float> noise(0.0f, 0.01f);
  std::vector<float> edited = c.base_values;
  for (float& v : edited) v += noise(rng);
  const ReencodeResult r = Reencode(c, edited);
  const CqMatrix m = UnpackBlob(r.blob, c.shape);
  const uint32_t g = c.shape.group;
  const double scale = 1.0 / std::sqrt(double(g));
  for (uint64_t q = 0; q < Groups(c); ++q) {
    const float* e = edited.data() + q * g;  // in is a multiple of g: no padding
    double num = 0, den = 0;
    for (uint32_t k = 0; k < g; ++k) {
      double rk = 0;
      for (uint32_t j = 0; j < g; ++j) rk += (__builtin_popcount(j & k) & 1 ? -1 : 1) * scale * e[j];
      const double cb = c.codebook[m.codes[q * g + k]];
      num += rk * cb;
      den += cb * cb;
    }
    const int want = FloatToHalf(float(num / den)), got = m.norms[q];
    EXPECT_LE(std::abs(want - got), 1) << "group " << q;
  }
}

TEST(Reencode, FarGroupsTakeTheExporterBytes) {
  // build --base with fresh float weights: the exporter's bytes, whether the weights are
  // those the base was built from or new ones.
  for (const Case& c : AllCases()) {
    SCOPED_TRACE(Name(c));
    ReencodeOptions o;
    o.quantize_far_groups = true;
    const ReencodeResult same = Reencode(c, c.weights, o);
    EXPECT_EQ(same.blob, c.base_blob);
    std::vector<float> fresh = c.weights;
    std::mt19937 rng(c.shape.bits * 1000 + c.shape.group);
    std::normal_distribution<float> noise(0.0f, 0.05f);
    for (float& v : fresh) v += noise(rng);
    const ReencodeResult r = Reencode(c, fresh, o);
    EXPECT_EQ(r.quantized, Groups(c));
    EXPECT_EQ(r.blob, PackBlob(QuantizeMatrix(fresh.data(), c.shape, c.codebook)));
    // A small edit of the deployed values is still an edit: refitted, not requantized.
    std::vector<float> edited = c.base_values;
    edited[7] += 1e-3f;
    const ReencodeResult e = Reencode(c, edited, o);
    EXPECT_EQ(e.reencoded, 1u);
    EXPECT_EQ(e.quantized, 0u);
  }
}

}  // namespace
}  // namespace cact
