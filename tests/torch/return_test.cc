// The way back: unedited export -> import is byte-identical (TorchScript and safetensors,
// both fixtures); an edit changes exactly the edited tensor, at its original width; schemes
// and --force-requantize; clear errors for missing or reshaped tensors and foreign inputs.
#include <gtest/gtest.h>

#include <filesystem>

#include "libtorch/bridge.h"
#include "formats/safetensors.h"
#include "quant/cact_diff.h"
#include "quant/scheme.h"
#include "torch_test_util.h"

namespace cact::testing {
namespace {

using torchscript::ImportRequest;
using torchscript::ImportToCact;
using torchscript::ReturnAction;
using torchscript::ReturnResult;

class RoundTrip : public ::testing::TestWithParam<std::string> {};

TEST_P(RoundTrip, UneditedTorchScriptIsByteIdentical) {
  const std::string kase = GetParam();
  ExportedCase& ex = Exported(kase);
  TempDir dir;
  ImportRequest req{ex.pt, std::nullopt, dir / "back.cact", {}};
  auto r = ImportToCact(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->changed(), 0u);
  EXPECT_EQ(ReadAll(dir / "back.cact"), ReadAll(Fixture(kase, "model.cact")));
}

TEST_P(RoundTrip, UneditedSafetensorsIsByteIdentical) {
  const std::string kase = GetParam();
  TempDir dir;
  auto file = CactFile::Open(Fixture(kase, "model.cact"));
  ASSERT_TRUE(file.ok());
  auto written = torchscript::ExportSafetensors(*file, dir / "export");
  ASSERT_TRUE(written.ok()) << written.status();
  EXPECT_TRUE(std::filesystem::exists(dir / "export/config.json"));
  ImportRequest req{dir / "export", Fixture(kase, "model.cact"), dir / "back.cact", {}};
  auto r = ImportToCact(req);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->changed(), 0u);
  EXPECT_TRUE(r->warnings.empty());
  EXPECT_EQ(ReadAll(dir / "back.cact"), ReadAll(Fixture(kase, "model.cact")));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, RoundTrip, ::testing::ValuesIn(FixtureCases()));

// Exports `kase` as safetensors into `dir`, lets `edit` change the tensors, rewrites them.
template <class Edit>
std::string EditedSafetensors(const TempDir& dir, const std::string& kase, Edit edit) {
  auto file = CactFile::Open(Fixture(kase, "model.cact"));
  EXPECT_TRUE(file.ok());
  const std::string path = dir / "model.safetensors";
  EXPECT_TRUE(torchscript::ExportSafetensors(*file, path).ok());
  auto st = ReadSafetensors(path);
  EXPECT_TRUE(st.ok());
  edit(&*st);
  EXPECT_TRUE(WriteSafetensors(path, *st).ok());
  return path;
}

FloatTensor* FindMutable(Safetensors* s, const std::string& name) {
  for (FloatTensor& t : s->tensors)
    if (t.name == name) return &t;
  ADD_FAILURE() << "no tensor " << name;
  static FloatTensor none;
  return &none;
}

// A rank-1 update of 5% of the weight's RMS per entry, as a small fine-tune would make.
void AddRankOne(FloatTensor* t, float scale) {
  const uint32_t rows = t->shape[0], cols = t->shape[1];
  double ss = 0;
  for (float v : t->data) ss += double(v) * v;
  const float rms = float(std::sqrt(ss / double(t->data.size())));
  for (uint32_t r = 0; r < rows; ++r)
    for (uint32_t c = 0; c < cols; ++c)
      t->data[size_t(r) * cols + c] +=
          scale * rms * std::sin(0.37f * r + 1.0f) * std::cos(0.11f * c);
}

std::vector<std::string> ChangedTensors(const std::string& a, const std::string& b) {
  auto fa = CactFile::Open(a), fb = CactFile::Open(b);
  EXPECT_TRUE(fa.ok() && fb.ok());
  auto d = DiffFiles(*fa, *fb);
  EXPECT_TRUE(d.ok());
  EXPECT_TRUE(d->header.empty());
  EXPECT_TRUE(d->codebook_identical);
  std::vector<std::string> out;
  for (const TensorDiff& t : d->tensors)
    if (t.status != TensorDiff::Status::kIdentical) out.push_back(t.name);
  return out;
}

TEST(Return, EditedMatrixIsReencodedAtItsWidthAndNothingElseChanges) {
  TempDir dir;
  const std::string st = EditedSafetensors(
      dir, "odd", [](Safetensors* s) { AddRankOne(FindMutable(s, "layer02.v_proj"), 0.05f); });
  ImportRequest req{st, Fixture("odd", "model.cact"), dir / "edited.cact", {}};
  auto r = ImportToCact(req);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->changed(), 1u);
  for (const auto& d : r->decisions) {
    if (d.name != "layer02.v_proj") continue;
    EXPECT_EQ(d.action, ReturnAction::kReencoded);
    EXPECT_EQ(d.before, "CQ2 g128");
    EXPECT_EQ(d.after, "CQ2 g128");
    EXPECT_NEAR(d.edit_rel, 0.05, 0.03);
    EXPECT_GT(d.survived, 0.0);
  }
  EXPECT_EQ(ChangedTensors(Fixture("odd", "model.cact"), dir / "edited.cact"),
            std::vector<std::string>{"layer02.v_proj"});
}

TEST(Return, EditedFp16VectorIsRounded) {
  TempDir dir;
  const std::string st = EditedSafetensors(
      dir, "tiny", [](Safetensors* s) { FindMutable(s, "layer01.post_norm")->data[3] += 0.25f; });
  auto r = ImportToCact({st, Fixture("tiny", "model.cact"), dir / "edited.cact", {}});
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->changed(), 1u);
  EXPECT_EQ(ChangedTensors(Fixture("tiny", "model.cact"), dir / "edited.cact"),
            std::vector<std::string>{"layer01.post_norm"});
  auto out = CactFile::Open(dir / "edited.cact");
  auto in = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(out.ok() && in.ok());
  auto a = in->blob(*in->Find("layer01.post_norm")), b = out->blob(*out->Find("layer01.post_norm"));
  // only element 3 (bytes 6..7) differs
  for (size_t i = 0; i < a.size(); ++i) EXPECT_EQ(a[i] == b[i], i / 2 != 3) << "byte " << i;
}

TEST(Return, SchemeChangesWidthsOfMatchingTensorsOnly) {
  ExportedCase& ex = Exported("tiny");
  TempDir dir;
  ImportRequest req{ex.pt, std::nullopt, dir / "w3.cact", {}};
  auto scheme = ParseScheme("embedding=4,mhc=4,attn.q_proj=3,default=2");
  ASSERT_TRUE(scheme.ok());
  req.options.scheme = *scheme;
  auto r = ImportToCact(req);
  ASSERT_TRUE(r.ok()) << r.status();
  auto out = CactFile::Open(dir / "w3.cact");
  ASSERT_TRUE(out.ok()) << out.status();
  size_t requantized = 0;
  for (const auto& d : r->decisions) {
    const bool q = d.name.find(".q_proj") != std::string::npos;
    EXPECT_EQ(d.action == ReturnAction::kRequantized, q) << d.name;
    if (q) {
      EXPECT_EQ(d.after, "CQ3 g128") << d.name;
    }
    requantized += d.action == ReturnAction::kRequantized;
  }
  EXPECT_EQ(requantized, out->geometry().num_layers);
}

TEST(Return, ForceRequantizeRebuildsEveryCqTensorFromItsValues) {
  ExportedCase& ex = Exported("odd");
  TempDir dir;
  ImportRequest req{ex.pt, std::nullopt, dir / "forced.cact", {}};
  req.options.force_requantize = true;
  auto r = ImportToCact(req);
  ASSERT_TRUE(r.ok()) << r.status();
  auto in = CactFile::Open(Fixture("odd", "model.cact"));
  auto out = CactFile::Open(dir / "forced.cact");
  ASSERT_TRUE(in.ok() && out.ok()) << out.status();
  for (const auto& d : r->decisions) {
    const TensorEntry* t = in->Find(d.name);
    ASSERT_NE(t, nullptr);
    EXPECT_EQ(d.action, t->is_cq() ? ReturnAction::kRequantized : ReturnAction::kRounded) << d.name;
    EXPECT_EQ(d.before, d.after) << d.name;
  }
  // FP16 values are exact in float32, so re-rounding gives the same bytes; CQ tensors are
  // quantized again from their dequantized values (not idempotent, but close).
  auto diff = DiffFiles(*in, *out);
  ASSERT_TRUE(diff.ok());
  for (const TensorDiff& t : diff->tensors) {
    if (!in->Find(t.name)->is_cq()) {
      EXPECT_EQ(t.status, TensorDiff::Status::kIdentical) << t.name;
    } else if (t.status == TensorDiff::Status::kChanged) {
      EXPECT_GT(t.code_agreement, 0.5) << t.name;
    }
  }
}

TEST(Return, MissingOrReshapedTensorsAreClearErrors) {
  TempDir dir;
  {
    const std::string st = EditedSafetensors(
        dir, "tiny", [](Safetensors* s) { s->tensors.erase(s->tensors.begin() + 5); });
    auto r = ImportToCact({st, Fixture("tiny", "model.cact"), dir / "x.cact", {}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("is missing"), std::string::npos) << r.status();
  }
  {
    const std::string st = EditedSafetensors(dir, "tiny", [](Safetensors* s) {
      FloatTensor* t = FindMutable(s, "layer00.k_proj");
      t->shape = {t->shape[1], t->shape[0]};  // transposed: same count, other shape
    });
    auto r = ImportToCact({st, Fixture("tiny", "model.cact"), dir / "x.cact", {}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("layer00.k_proj' has shape"), std::string::npos)
        << r.status();
  }
  {
    const std::string st = EditedSafetensors(dir, "tiny", [](Safetensors* s) {
      s->tensors.push_back({"layer00.lora_A", {2, 2}, {0, 0, 0, 0}, "F32"});
    });
    auto r = ImportToCact({st, Fixture("tiny", "model.cact"), dir / "x.cact", {}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("layer00.lora_A"), std::string::npos) << r.status();
  }
  {
    const std::string st = EditedSafetensors(
        dir, "tiny", [](Safetensors* s) { FindMutable(s, "layer00.q_proj")->data[0] = NAN; });
    auto r = ImportToCact({st, Fixture("tiny", "model.cact"), dir / "x.cact", {}});
    ASSERT_FALSE(r.ok());
    EXPECT_NE(r.status().message().find("non-finite"), std::string::npos) << r.status();
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "x.cact"));  // nothing written on error
}

TEST(Return, ForeignInputsAreClearErrors) {
  TempDir dir;
  // safetensors without its base .cact
  auto no_base =
      ImportToCact({Fixture("tiny", "weights.safetensors"), std::nullopt, dir / "x.cact", {}});
  ASSERT_FALSE(no_base.ok());
  EXPECT_NE(no_base.status().message().find("needs its base .cact"), std::string::npos);
  // a zip that is not a TorchScript archive
  WriteAll(dir / "fake.pt", {'P', 'K', 3, 4, 0, 0, 0, 0, 1, 2, 3});
  auto fake = ImportToCact({dir / "fake.pt", std::nullopt, dir / "x.cact", {}});
  ASSERT_FALSE(fake.ok());
  EXPECT_NE(fake.status().message().find("not a loadable TorchScript archive"), std::string::npos)
      << fake.status();
  // a .cact given as the model
  auto cact = ImportToCact(
      {Fixture("tiny", "model.cact"), Fixture("tiny", "model.cact"), dir / "x.cact", {}});
  EXPECT_FALSE(cact.ok());
  // a truncated module
  std::vector<uint8_t> pt = ReadAll(Exported("tiny").pt);
  pt.resize(pt.size() / 2);
  WriteAll(dir / "half.pt", pt);
  auto half = ImportToCact({dir / "half.pt", std::nullopt, dir / "x.cact", {}});
  EXPECT_FALSE(half.ok());
  EXPECT_FALSE(std::filesystem::exists(dir / "x.cact"));
}

// The official float weights (before quantization) are an edit of every tensor: every
// record is quantized/rounded again, and (fixture README: requantizing weights.safetensors
// reproduced both files byte for byte) the result is the exporter's file exactly.
TEST(Return, OfficialFloatWeightsReproduceTheExportersFile) {
  for (const std::string& kase : FixtureCases()) {
    TempDir dir;
    auto r = ImportToCact(
        {Fixture(kase, "weights.safetensors"), Fixture(kase, "model.cact"), dir / "w.cact", {}});
    ASSERT_TRUE(r.ok()) << r.status();
    size_t cq = 0;
    for (const auto& d : r->decisions) cq += d.action == ReturnAction::kRequantized;
    EXPECT_GT(cq, 0u) << kase;
    EXPECT_EQ(ReadAll(dir / "w.cact"), ReadAll(Fixture(kase, "model.cact"))) << kase;
  }
}

}  // namespace
}  // namespace cact::testing
