// cact-quant build (quant/build.h) against the official fixtures: quantizing the float
// weights reproduces the exporter's file, the official dequantization rebuilt against the
// base gives the base back byte for byte, edits requantize exactly the edited tensors, and
// bad inputs are clear errors.
#include "quant/build.h"

#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <fstream>

#include "cq_agreement.h"
#include "formats/needle/named_geometries.h"
#include "lib/file_bytes.h"
#include "quant/cq/codebook.h"
#include "quant/cq/fp16.h"
#include "quant/weights_geometry.h"
#include "rebuild_test_util.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::FixtureBytes;
using testing::OfficialDequant;
using testing::Serialize;

class FixtureBuild : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureBuild, WeightsAndTokenizerModelGiveTheExportersFile) {
  const std::string kase = GetParam();
  absl::StatusOr<Safetensors> w = ReadSafetensors(Fixture(kase, "weights.safetensors"));
  ASSERT_TRUE(w.ok()) << w.status();
  absl::StatusOr<TokenizerBlob> tok = ReadSentencePieceModel(Fixture(kase, "tokenizer.model"));
  ASSERT_TRUE(tok.ok()) << tok.status();
  BuildRequest req;
  req.weights = &*w;
  req.weights_path = "weights.safetensors";
  req.tokenizer = *tok;
  RebuildReport report;
  absl::StatusOr<CactContents> c = BuildCact(req, &report);
  ASSERT_TRUE(c.ok()) << c.status();
  const std::vector<uint8_t> got = Serialize(*c), want = FixtureBytes(kase);
  absl::StatusOr<CactFile> official = CactFile::Open(Fixture(kase, "model.cact"));
  ASSERT_TRUE(official.ok());
  const size_t n = official->tensors().size();
  ASSERT_EQ(c->tensors.size(), n);
  // Header, codebook and directory; the tokenizer blob.
  EXPECT_EQ(testing::Prefix(got, n), testing::Prefix(want, n));
  const std::vector<uint8_t>& tok_bytes = c->tensors.back().bytes;
  std::span<const uint8_t> want_tok = official->tokenizer_blob();
  EXPECT_TRUE(std::equal(tok_bytes.begin(), tok_bytes.end(), want_tok.begin(), want_tok.end()));
  // Codes and norms must agree with the official exporter's (>= 99.99 %, norms within 1 ulp).
  uint64_t codes = 0, equal = 0;
  for (size_t i = 0; i < n; ++i) {
    const TensorEntry& t = official->tensors()[i];
    if (!t.is_cq()) {
      EXPECT_TRUE(std::equal(c->tensors[i].bytes.begin(), c->tensors[i].bytes.end(),
                             official->blob(t).begin(), official->blob(t).end()))
          << t.name;
      continue;
    }
    CqShape s{uint32_t(t.rows()), uint32_t(t.cols()), t.record.group, t.record.bits};
    CqMatrix ours = UnpackBlob(c->tensors[i].bytes, s), theirs = UnpackBlob(official->blob(t), s);
    const FloatTensor* wt = w->Find(t.name);
    testing::Agreement a =
        testing::CompareQuantizations(wt->data.data(), s, CqCodebook(s.bits, s.group), ours.codes,
                                      theirs.codes, ours.norms, theirs.norms);
    codes += a.codes;
    equal += a.codes_equal;
    EXPECT_EQ(a.norms_within_1ulp, a.norms) << t.name;
    EXPECT_LT(a.max_margin, 1e-6) << t.name << ": " << testing::Describe(a);
  }
  EXPECT_GE(double(equal) / double(codes), 0.9999);
  // With the FWHT the fixtures come out byte for byte (their README: achievable, and achieved).
  EXPECT_EQ(got, want);
  EXPECT_EQ(report.scheme,
            (kase == "odd" ? "embedding=4,mhc=3,default=2" : "embedding=4,mhc=4,default=2"));
  EXPECT_EQ(report.scheme_source, "safetensors metadata bits_map");
  EXPECT_EQ(report.Count(TensorAction::kQuantized), kase == "odd" ? 35u : 30u);
  for (const TensorOutcome& t : report.tensors) {
    if (t.action == TensorAction::kQuantized) {
      EXPECT_GT(t.rel_mse, 0.0) << t.name;
    }
  }
}

TEST_P(FixtureBuild, OfficialDequantRebuiltAgainstBaseIsTheBase) {
  const std::string kase = GetParam();
  Safetensors deq = OfficialDequant(kase);
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture(kase, "model.cact"));
  ASSERT_TRUE(base.ok());
  for (KeepPolicy policy : {KeepPolicy::kTolerance, KeepPolicy::kExact}) {
    BuildRequest req;
    req.weights = &deq;
    req.base = &*base;
    req.keep = policy;
    RebuildReport report;
    absl::StatusOr<CactContents> c = BuildCact(req, &report);
    ASSERT_TRUE(c.ok()) << c.status();
    EXPECT_EQ(Serialize(*c), FixtureBytes(kase)) << "policy " << int(policy);
    EXPECT_EQ(report.Count(TensorAction::kKept), base->tensors().size() - 1);
    EXPECT_EQ(report.geometry_source, "base file");
    EXPECT_EQ(report.scheme_source, "base file widths");
  }
}

TEST_P(FixtureBuild, RoundTripThroughZstdFile) {
  const std::string kase = GetParam();
  Safetensors deq = OfficialDequant(kase);
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture(kase, "model.cact"));
  ASSERT_TRUE(base.ok());
  BuildRequest req;
  req.weights = &deq;
  req.base = &*base;
  RebuildReport report;
  absl::StatusOr<CactContents> c = BuildCact(req, &report);
  ASSERT_TRUE(c.ok()) << c.status();
  testing::TempDir dir;
  ASSERT_TRUE(FinishRebuild(*c, dir / "rt.cact.zst", 3, &report).ok());
  EXPECT_TRUE(report.zstd);
  EXPECT_GT(report.written_bytes, 0u);
  EXPECT_LT(report.written_bytes, report.file_bytes);
  absl::StatusOr<FileBytes> back = FileBytes::Open(dir / "rt.cact.zst");
  ASSERT_TRUE(back.ok());
  EXPECT_TRUE(back->decompressed());
  const std::vector<uint8_t> want = FixtureBytes(kase);
  EXPECT_TRUE(std::equal(back->span().begin(), back->span().end(), want.begin(), want.end()));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureBuild, ::testing::ValuesIn(testing::FixtureCases()));

struct Built {
  RebuildReport report;
  CactContents contents;
};

Built BuildAgainstBase(const Safetensors& w, const CactFile& base, KeepPolicy policy,
                       std::optional<Scheme> scheme = std::nullopt) {
  BuildRequest req;
  req.weights = &w;
  req.base = &base;
  req.keep = policy;
  req.scheme = scheme;
  Built b;
  absl::StatusOr<CactContents> c = BuildCact(req, &b.report);
  EXPECT_TRUE(c.ok()) << c.status();
  if (c.ok()) b.contents = std::move(*c);
  return b;
}

const TensorOutcome& Outcome(const RebuildReport& r, const std::string& name) {
  for (const TensorOutcome& t : r.tensors)
    if (t.name == name) return t;
  static TensorOutcome none;
  ADD_FAILURE() << "no outcome for " << name;
  return none;
}

TEST(SelectiveBuild, OnlyEditedTensorsAreRequantized) {
  Safetensors w = OfficialDequant("tiny");
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(base.ok());
  const_cast<FloatTensor*>(w.Find("layer01.q_proj"))->data[5] += 0.01f;
  const_cast<FloatTensor*>(w.Find("layer02.norm_in"))->data[3] += 0.25f;
  Built b = BuildAgainstBase(w, *base, KeepPolicy::kTolerance);
  ASSERT_EQ(b.contents.tensors.size(), base->tensors().size());
  for (size_t i = 0; i < b.report.tensors.size(); ++i) {
    const TensorOutcome& t = b.report.tensors[i];
    const TensorEntry& e = base->tensors()[i];
    const bool same =
        std::equal(b.contents.tensors[i].bytes.begin(), b.contents.tensors[i].bytes.end(),
                   base->blob(e).begin(), base->blob(e).end());
    if (t.name == "layer01.q_proj") {
      // Re-encoded: the edited group refitted, every other group's bytes kept.
      EXPECT_EQ(t.action, TensorAction::kReencoded);
      EXPECT_NE(t.reason.find("values differ from base"), std::string::npos) << t.reason;
      EXPECT_FALSE(same);
      ASSERT_TRUE(t.groups.has_value());
      EXPECT_EQ(t.groups->reencoded, 1u);
      EXPECT_EQ(t.groups->quantized, 0u);
      EXPECT_EQ(t.groups->kept, e.rows() * ((e.cols() + 127) / 128) - 1);
    } else if (t.name == "layer02.norm_in") {
      EXPECT_EQ(t.action, TensorAction::kEncoded);
      EXPECT_FALSE(same);
    } else {
      EXPECT_TRUE(t.action == TensorAction::kKept || t.action == TensorAction::kCopied) << t.name;
      EXPECT_TRUE(same) << t.name;
    }
  }
  EXPECT_EQ(b.report.Count(TensorAction::kReencoded), 1u);
  EXPECT_EQ(b.report.Count(TensorAction::kEncoded), 1u);
}

TEST(SelectiveBuild, FreshFloatWeightsAgainstABaseBuildTheExportersFile) {
  // The float weights the base was exported from are new values, not an edit of it: every
  // group is quantized by the exporter's rule, byte for byte the official file.
  for (const char* kase : {"tiny", "odd"}) {
    absl::StatusOr<Safetensors> w = ReadSafetensors(Fixture(kase, "weights.safetensors"));
    ASSERT_TRUE(w.ok()) << w.status();
    absl::StatusOr<CactFile> base = CactFile::Open(Fixture(kase, "model.cact"));
    ASSERT_TRUE(base.ok());
    Built b = BuildAgainstBase(*w, *base, KeepPolicy::kTolerance);
    EXPECT_EQ(Serialize(b.contents), FixtureBytes(kase)) << kase;
    EXPECT_EQ(b.report.Count(TensorAction::kReencoded), 0u) << kase;
  }
}

TEST(SelectiveBuild, FloatRoundingNoiseIsKeptButNotUnderExact) {
  // Another implementation's dequantization: every value moved by ~1e-7 relative.
  Safetensors w = OfficialDequant("odd");
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("odd", "model.cact"));
  ASSERT_TRUE(base.ok());
  for (FloatTensor& t : w.tensors)
    if (t.name != "heads.manifest")  // head codes are exact integers, not weights
      for (size_t i = 0; i < t.data.size(); i += 3) t.data[i] = std::nextafter(t.data[i], 1e9f);
  Built tol = BuildAgainstBase(w, *base, KeepPolicy::kTolerance);
  EXPECT_EQ(Serialize(tol.contents), FixtureBytes("odd"));
  // --exact keeps no group that is not bitwise equal: every CQ tensor is re-encoded, and the
  // refit, a fixed point, gives back the same bytes all the same.
  Built exact = BuildAgainstBase(w, *base, KeepPolicy::kExact);
  size_t cq = 0;
  for (const TensorEntry& t : base->tensors()) cq += t.is_cq();
  EXPECT_EQ(exact.report.Count(TensorAction::kReencoded), cq);
  EXPECT_EQ(Serialize(exact.contents), FixtureBytes("odd"));
  EXPECT_NE(Outcome(exact.report, "embedding").reason.find("--exact"), std::string::npos);
}

TEST(SelectiveBuild, ForceRequantizeAndWidthChanges) {
  Safetensors w = OfficialDequant("odd");
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("odd", "model.cact"));
  ASSERT_TRUE(base.ok());
  Built forced = BuildAgainstBase(w, *base, KeepPolicy::kNever);
  EXPECT_EQ(forced.report.Count(TensorAction::kKept), 0u);
  EXPECT_EQ(Outcome(forced.report, "layer00.q_proj").reason, "--force-requantize");
  // Requantizing dequantized values is not idempotent: the bytes move.
  EXPECT_NE(Serialize(forced.contents), FixtureBytes("odd"));

  // The odd fixture has mhc=3: asking for mhc=4 requantizes exactly the three mhc_phi.
  Built widened = BuildAgainstBase(w, *base, KeepPolicy::kTolerance,
                                   *ParseScheme("embedding=4,mhc=4,default=2"));
  EXPECT_EQ(widened.report.Count(TensorAction::kQuantized), 3u);
  for (const char* name : {"mhc_phi_pre", "mhc_phi_post", "mhc_phi_res"}) {
    const TensorOutcome& t = Outcome(widened.report, name);
    EXPECT_EQ(t.action, TensorAction::kQuantized);
    EXPECT_EQ(t.target, "CQ4 g128");
    EXPECT_EQ(t.reason, "base is CQ3 g128, scheme asks CQ4 g128");
  }
}

TEST(BuildPlan, DryRunSizesMatchTheRealFileAndWriteNothing) {
  absl::StatusOr<Safetensors> w = ReadSafetensors(Fixture("odd", "weights.safetensors"));
  absl::StatusOr<TokenizerBlob> tok = ReadSentencePieceModel(Fixture("odd", "tokenizer.model"));
  ASSERT_TRUE(w.ok() && tok.ok());
  BuildRequest req;
  req.weights = &*w;
  req.tokenizer = *tok;
  req.dry_run = true;
  RebuildReport report;
  absl::StatusOr<CactContents> c = BuildCact(req, &report);
  ASSERT_TRUE(c.ok()) << c.status();
  for (const TensorBlob& t : c->tensors) {
    if (t.record.dtype == DType::kCQ) {
      EXPECT_TRUE(t.bytes.empty()) << t.name;
    }
  }
  testing::TempDir dir;
  ASSERT_TRUE(FinishRebuild(*c, dir / "never.cact", 19, &report).ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "never.cact"));
  EXPECT_EQ(report.file_bytes, FixtureBytes("odd").size());
  EXPECT_EQ(report.written_bytes, 0u);
}

TEST(BuildGeometry, OfficialConfigGivesTheFixtureHeaders) {
  for (const std::string& kase : testing::FixtureCases()) {
    absl::StatusOr<Safetensors> w = ReadSafetensors(Fixture(kase, "weights.safetensors"));
    absl::StatusOr<CactFile> f = CactFile::Open(Fixture(kase, "model.cact"));
    ASSERT_TRUE(w.ok() && f.ok());
    absl::StatusOr<Geometry> g = GeometryFromOfficialConfig(w->metadata.at("config"), 256, kase);
    ASSERT_TRUE(g.ok()) << g.status();
    Header a{kCactTag, 0, 28, *g}, b{kCactTag, 0, 28, f->geometry()};
    EXPECT_EQ(SerializeHeader(a), SerializeHeader(b)) << kase;
  }
}

TEST(BuildGeometry, ShapesAloneGiveTheReleasedGeometry) {
  // Only the tensors the inference reads, with the released shapes.
  const Geometry g = Needle2Geometry();
  Safetensors w;
  auto add = [&](const std::string& name, std::vector<uint32_t> shape) {
    FloatTensor t;
    t.name = name;
    t.shape = shape;
    size_t n = 1;
    for (uint32_t d : shape) n *= d;
    t.data.assign(n, 0.0f);
    w.tensors.push_back(std::move(t));
  };
  add("embedding", {g.vocab, g.d_model});
  add("layer00.q_proj", {g.attn_dim(), g.d_model});
  add("layer00.k_proj", {g.kv_dim(), g.d_model});
  add("layer00.q_norm", {g.head_dim});
  add("layer00.d1", {g.hada_n});
  add("mhc_b_pre", {g.num_layers, g.mhc_lanes});
  add("engram0.tables", {g.num_engram_tables * g.engram_slots, g.engram_sub_dim});
  add("engram1.tables", {g.num_engram_tables * g.engram_slots, g.engram_sub_dim});
  std::string assumed;
  absl::StatusOr<Geometry> got = InferGeometryFromShapes(w, "w", &assumed);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(SerializeHeader(Header{kCactTag, 0, 28, *got}),
            SerializeHeader(Header{kCactTag, 0, 28, g}));
  EXPECT_NE(assumed.find("engram sites 2,15"), std::string::npos);

  // The tiny fixture (4 layers, sites 1 and 3): the site layers cannot come from shapes.
  absl::StatusOr<Safetensors> tiny = ReadSafetensors(Fixture("tiny", "weights.safetensors"));
  ASSERT_TRUE(tiny.ok());
  absl::StatusOr<Geometry> bad = InferGeometryFromShapes(*tiny, "tiny", &assumed);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("engram site layers cannot be inferred"),
            std::string::npos);
}

// Each malformed input is a specific error (and nothing is built).
TEST(BuildErrors, BadWeightsTokenizersAndBases) {
  absl::StatusOr<Safetensors> good = ReadSafetensors(Fixture("tiny", "weights.safetensors"));
  absl::StatusOr<TokenizerBlob> tok = ReadSentencePieceModel(Fixture("tiny", "tokenizer.model"));
  absl::StatusOr<TokenizerBlob> odd_tok = ReadSentencePieceModel(Fixture("odd", "tokenizer.model"));
  absl::StatusOr<CactFile> odd = CactFile::Open(Fixture("odd", "model.cact"));
  ASSERT_TRUE(good.ok() && tok.ok() && odd_tok.ok() && odd.ok());
  auto expect_error = [&](Safetensors w, std::optional<TokenizerBlob> t, const CactFile* base,
                          const std::string& want) {
    BuildRequest req;
    req.weights = &w;
    req.weights_path = "w.safetensors";
    req.tokenizer = std::move(t);
    req.base = base;
    RebuildReport report;
    absl::StatusOr<CactContents> c = BuildCact(req, &report);
    ASSERT_FALSE(c.ok()) << "expected: " << want;
    EXPECT_NE(c.status().message().find(want), std::string::npos) << c.status().message();
  };
  auto edit = [&](auto fn) {
    Safetensors w = *good;
    fn(w);
    return w;
  };
  expect_error(edit([](Safetensors& w) {
                 std::erase_if(w.tensors,
                               [](const FloatTensor& t) { return t.name == "layer02.k_norm"; });
               }),
               *tok, nullptr, "tensor 'layer02.k_norm' is missing");
  expect_error(edit([](Safetensors& w) {
                 FloatTensor* t = const_cast<FloatTensor*>(w.Find("layer00.q_proj"));
                 t->shape = {64, 128};
                 t->data.resize(64 * 128);
               }),
               *tok, nullptr,
               "tensor 'layer00.q_proj' has shape [64, 128] but the geometry needs [128, 128]");
  expect_error(edit([](Safetensors& w) {
                 const_cast<FloatTensor*>(w.Find("layer01.v_proj"))->data[7] = NAN;
               }),
               *tok, nullptr,
               "tensor 'layer01.v_proj' has a non-finite value (nan) at flat index 7");
  expect_error(edit([](Safetensors& w) {
                 FloatTensor t;
                 t.name = "lm_head";
                 t.shape = {1};
                 t.data = {0};
                 w.tensors.push_back(t);
               }),
               *tok, nullptr, "unexpected tensor 'lm_head'");
  expect_error(*good, std::nullopt, nullptr, "no tokenizer: give a SentencePiece tokenizer model");
  expect_error(*good, *odd_tok, nullptr, "has 384 pieces but the model's vocab is 512");
  expect_error(edit([](Safetensors& w) { w.metadata["bits_map"] = "embedding=4,mhc=9,default=2"; }),
               *tok, nullptr, "metadata bits_map");
  expect_error(*good, *tok, &*odd, "differs from the base file's");
}

}  // namespace
}  // namespace cact
