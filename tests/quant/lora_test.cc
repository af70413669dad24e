// LoRA merges: PEFT and stacked layouts give the same file, merged values equal numpy's
// FP32 `W + scale * (B @ A)`, untouched tensors keep their bytes, the diff shows exactly
// the touched tensors, the report figures are right, and bad adapters are named errors.
#include "quant/import/lora.h"

#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <random>
#include <set>

#include "absl/strings/str_format.h"
#include "quant/cact_diff.h"
#include "quant/cq/reencode.h"
#include "quant/tensor_values.h"
#include "quant_test_util.h"
#include "rebuild_test_util.h"

namespace cact {
namespace {

using testing::Fixture;

struct Generated {
  Safetensors peft, stacked;
  std::string config = R"({"r": 4, "lora_alpha": 8, "use_rslora": false})";  // scale 2
};

constexpr uint32_t kRank = 4;
const std::vector<uint32_t> kLayers = {0, 2};
const std::vector<std::string> kProj = {"q_proj", "v_proj", "out_proj"};

std::pair<uint32_t, uint32_t> OutIn(const std::string& p, const Geometry& g) {
  if (p == "v_proj") return {g.kv_dim(), g.d_model};
  if (p == "out_proj") return {g.d_model, g.attn_dim()};
  return {g.attn_dim(), g.d_model};
}

// Random A/B for layers 0 and 2, three projections; the stacked layout holds the same
// numbers (transposed, Flax orientation) with zeros for the other layers.
Generated Generate(const Geometry& g, float sigma) {
  Generated gen;
  std::mt19937 rng(42);
  std::normal_distribution<float> normal(0.0f, sigma);
  const uint32_t L = g.num_layers;
  for (const std::string& p : kProj) {
    const auto [out, in] = OutIn(p, g);
    FloatTensor sa{
        p + ".A", {L, in, kRank}, std::vector<float>(size_t(L) * in * kRank, 0.0f), "F32"};
    FloatTensor sb{
        p + ".B", {L, kRank, out}, std::vector<float>(size_t(L) * kRank * out, 0.0f), "F32"};
    for (uint32_t l : kLayers) {
      const std::string key =
          absl::StrFormat("base_model.model.model.layers.%d.self_attn.%s", l, p);
      FloatTensor a{
          key + ".lora_A.weight", {kRank, in}, std::vector<float>(size_t(kRank) * in), "F32"};
      FloatTensor b{
          key + ".lora_B.weight", {out, kRank}, std::vector<float>(size_t(out) * kRank), "F32"};
      for (float& v : a.data) v = normal(rng);
      for (float& v : b.data) v = normal(rng);
      for (uint32_t r = 0; r < kRank; ++r)
        for (uint32_t i = 0; i < in; ++i)
          sa.data[(size_t(l) * in + i) * kRank + r] = a.data[size_t(r) * in + i];
      for (uint32_t o = 0; o < out; ++o)
        for (uint32_t r = 0; r < kRank; ++r)
          sb.data[(size_t(l) * kRank + r) * out + o] = b.data[size_t(o) * kRank + r];
      gen.peft.tensors.push_back(std::move(a));
      gen.peft.tensors.push_back(std::move(b));
    }
    gen.stacked.tensors.push_back(std::move(sa));
    gen.stacked.tensors.push_back(std::move(sb));
  }
  gen.stacked.metadata["scale"] = "2";
  return gen;
}

struct Merged {
  LoraAdapter adapter;
  RebuildReport report;
  CactContents contents;
};

Merged Merge(const CactFile& base, const Safetensors& st, const std::string& config,
             std::optional<double> scale = std::nullopt, bool exporter_rule = false,
             std::optional<Scheme> scheme = std::nullopt) {
  Merged m;
  absl::StatusOr<LoraAdapter> ad = ParseLoraAdapter(st, "adapter", config, scale, base.geometry());
  EXPECT_TRUE(ad.ok()) << ad.status();
  if (!ad.ok()) return m;
  m.adapter = *ad;
  LoraRequest req;
  req.base = &base;
  req.adapter = &m.adapter;
  req.exporter_rule = exporter_rule;
  req.scheme = scheme;
  absl::StatusOr<CactContents> c = MergeLora(req, &m.report);
  EXPECT_TRUE(c.ok()) << c.status();
  if (c.ok()) m.contents = std::move(*c);
  return m;
}

TEST(Lora, BothLayoutsMergeToTheSameFileAndTouchOnlyTheirTensors) {
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(base.ok());
  Generated gen = Generate(base->geometry(), 0.05f);
  Merged peft = Merge(*base, gen.peft, gen.config);
  Merged stacked = Merge(*base, gen.stacked, "");
  EXPECT_EQ(peft.adapter.layout, "peft");
  EXPECT_EQ(stacked.adapter.layout, "stacked");
  EXPECT_EQ(peft.adapter.scale, 2.0);
  EXPECT_EQ(stacked.adapter.scale, 2.0);
  const std::vector<uint8_t> a = testing::Serialize(peft.contents),
                             b = testing::Serialize(stacked.contents);
  ASSERT_FALSE(a.empty());
  EXPECT_EQ(a, b);

  std::set<std::string> touched;
  for (uint32_t l : kLayers)
    for (const std::string& p : kProj) touched.insert(absl::StrFormat("layer%02d.%s", l, p));
  EXPECT_EQ(peft.report.Count(TensorAction::kReencoded), touched.size());
  EXPECT_EQ(stacked.report.Count(TensorAction::kReencoded), touched.size());
  // The diff of base and result names exactly the touched tensors.
  absl::StatusOr<CactFile> out = CactFile::FromBytes(FileBytes::FromBuffer("merged", a));
  ASSERT_TRUE(out.ok()) << out.status();
  absl::StatusOr<CactDiff> diff = DiffFiles(*base, *out);
  ASSERT_TRUE(diff.ok());
  std::set<std::string> changed;
  for (const TensorDiff& t : diff->tensors)
    if (t.status != TensorDiff::Status::kIdentical) changed.insert(t.name);
  EXPECT_EQ(changed, touched);
  EXPECT_TRUE(diff->header.empty());
  EXPECT_TRUE(diff->codebook_identical);
}

TEST(Lora, MergedValuesEqualNumpyFp32) {
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(base.ok());
  Generated gen = Generate(base->geometry(), 0.05f);
  Merged m = Merge(*base, gen.peft, gen.config);
  testing::TempDir dir;
  std::string names;
  for (const LoraPair& p : m.adapter.pairs) {
    const std::string name = absl::StrFormat("layer%02d.%s", p.layer, p.proj);
    testing::WriteAll(dir / (name + ".a"),
                      std::vector<uint8_t>((const uint8_t*)p.a.data(),
                                           (const uint8_t*)(p.a.data() + p.a.size())));
    testing::WriteAll(dir / (name + ".b"),
                      std::vector<uint8_t>((const uint8_t*)p.b.data(),
                                           (const uint8_t*)(p.b.data() + p.b.size())));
    names += absl::StrFormat("('%s', %d, %d, %d),", name, p.out, p.in, p.rank);
  }
  // W is the official reader's dequantization (bit-identical to ours), merged by numpy in
  // float32. B A is summed over the rank in order, one rounding per multiply and per add:
  // the reference BLAS's order. `b @ a` would take whatever order the installed BLAS uses
  // (OpenBLAS blocks and fuses), which changes the last bits from one machine to the next.
  ASSERT_TRUE(testing::RunPythonOracle(dir, R"(
import numpy as np
for name, out, inn, r in [)" + names + R"(]:
    w = np.load(')" + Fixture("tiny", "official_dequant/") +
                                                R"(' + name + '.npy')
    a = np.fromfile(name + '.a', np.float32).reshape(r, inn)
    b = np.fromfile(name + '.b', np.float32).reshape(out, r)
    ba = np.zeros((out, inn), np.float32)
    for k in range(r):
        ba += b[:, k:k + 1] * a[k:k + 1, :]
    (w + np.float32(2.0) * ba).astype(np.float32).tofile(name + '.merged')
)"));
  for (const LoraPair& p : m.adapter.pairs) {
    const std::string name = absl::StrFormat("layer%02d.%s", p.layer, p.proj);
    std::vector<float> want = testing::ReadRaw<float>(dir / (name + ".merged"));
    absl::StatusOr<std::vector<float>> w = TensorValues(*base, *base->Find(name));
    ASSERT_TRUE(w.ok());
    std::vector<float> dw = LoraDelta(p, m.adapter.scale);
    ASSERT_EQ(want.size(), w->size());
    std::vector<float> merged(w->size());
    size_t differ = 0;
    for (size_t k = 0; k < merged.size(); ++k) {
      merged[k] = (*w)[k] + dw[k];
      differ += testing::BitsOf(merged[k]) != testing::BitsOf(want[k]);
    }
    EXPECT_EQ(differ, 0u) << name;
    // The file holds those merged values re-encoded against the base's bytes: at least as
    // close to them as the exporter's rule would put them.
    const TensorEntry& t = *base->Find(name);
    const CqShape s{uint32_t(t.rows()), uint32_t(t.cols()), t.record.group, t.record.bits};
    const std::vector<float> cb = base->CodebookFor(s.bits, s.group);
    size_t index = t.index;
    ReencodeOptions ro;
    ro.keep_tolerance = kKeepTolerance;
    const ReencodeResult r = ReencodeMatrix(base->blob(t), s, cb, merged.data(), w->data(), ro);
    EXPECT_EQ(m.contents.tensors[index].bytes, r.blob);
    std::vector<float> written(merged.size()), exporter(merged.size());
    DequantizeBlob(m.contents.tensors[index].bytes, s, cb, written.data());
    DequantizeBlob(PackBlob(QuantizeMatrix(merged.data(), s, cb)), s, cb, exporter.data());
    double e_written = 0, e_exporter = 0;
    for (size_t k = 0; k < merged.size(); ++k) {
      e_written += (double(written[k]) - merged[k]) * (double(written[k]) - merged[k]);
      e_exporter += (double(exporter[k]) - merged[k]) * (double(exporter[k]) - merged[k]);
    }
    EXPECT_LE(e_written, e_exporter) << name;
    // Report figures, recomputed independently.
    const TensorOutcome& o = m.report.tensors[index];
    ASSERT_TRUE(o.lora.has_value()) << name;
    double w2 = 0, d2 = 0;
    for (size_t k = 0; k < merged.size(); ++k) {
      w2 += double((*w)[k]) * (*w)[k];
      d2 += double(dw[k]) * dw[k];
    }
    EXPECT_NEAR(o.lora->update_rel, std::sqrt(d2 / w2), 1e-9 * std::sqrt(d2 / w2));
    EXPECT_EQ(o.lora->rank, kRank);
    EXPECT_GT(o.lora->survived, 0.0) << name;
  }
}

TEST(Lora, TheExporterRuleQuantizesTheMergedValuesAfresh) {
  // --exporter-rule: each merged tensor is the exporter's quantization of W + dW, the
  // official path's numerics; the re-encoded default is at least as close to W + dW.
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(base.ok());
  Generated gen = Generate(base->geometry(), 0.05f);
  Merged exporter = Merge(*base, gen.peft, gen.config, std::nullopt, true);
  Merged reencoded = Merge(*base, gen.peft, gen.config);
  EXPECT_EQ(exporter.report.Count(TensorAction::kRequantized), 6u);
  for (const LoraPair& p : exporter.adapter.pairs) {
    const std::string name = absl::StrFormat("layer%02d.%s", p.layer, p.proj);
    const TensorEntry& t = *base->Find(name);
    absl::StatusOr<std::vector<float>> w = TensorValues(*base, t);
    ASSERT_TRUE(w.ok());
    const std::vector<float> dw = LoraDelta(p, exporter.adapter.scale);
    std::vector<float> merged(w->size());
    for (size_t k = 0; k < merged.size(); ++k) merged[k] = (*w)[k] + dw[k];
    const CqShape s{uint32_t(t.rows()), uint32_t(t.cols()), t.record.group, t.record.bits};
    const std::vector<float> cb = base->CodebookFor(s.bits, s.group);
    EXPECT_EQ(exporter.contents.tensors[t.index].bytes,
              PackBlob(QuantizeMatrix(merged.data(), s, cb))) << name;
    std::vector<float> a(merged.size()), b(merged.size());
    DequantizeBlob(exporter.contents.tensors[t.index].bytes, s, cb, a.data());
    DequantizeBlob(reencoded.contents.tensors[t.index].bytes, s, cb, b.data());
    double ea = 0, eb = 0;
    for (size_t k = 0; k < merged.size(); ++k) {
      ea += (double(a[k]) - merged[k]) * (double(a[k]) - merged[k]);
      eb += (double(b[k]) - merged[k]) * (double(b[k]) - merged[k]);
    }
    EXPECT_LE(eb, ea) << name;
  }
}

TEST(Lora, ANewWidthQuantizesTheMergeAfreshAndRequantizesTheRest) {
  // A scheme that changes widths (an adapter's QAT metadata, or --scheme): an adapted matrix
  // is the exporter's quantization of W + dW at the new width; any other matrix is what
  // requant writes (its dequantized values at the new width); vectors keep their bytes.
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(base.ok());
  Generated gen = Generate(base->geometry(), 0.05f);
  absl::StatusOr<Scheme> scheme = ParseScheme("embedding=3,mhc=2,default=4");
  ASSERT_TRUE(scheme.ok());
  Merged m = Merge(*base, gen.peft, gen.config, std::nullopt, false, *scheme);
  EXPECT_EQ(m.report.scheme, "embedding=3,mhc=2,default=4");
  std::map<std::string, const LoraPair*> adapted;
  for (const LoraPair& p : m.adapter.pairs)
    adapted[absl::StrFormat("layer%02d.%s", p.layer, p.proj)] = &p;
  size_t checked = 0;
  for (const TensorEntry& t : base->tensors()) {
    SCOPED_TRACE(t.name);
    const TensorBlob& got = m.contents.tensors[t.index];
    if (t.kind != TensorKind::kMatrix) {
      EXPECT_EQ(got.bytes, std::vector<uint8_t>(base->blob(t).begin(), base->blob(t).end()));
      continue;
    }
    const uint32_t bits = scheme->BitsFor(t.name);
    ASSERT_EQ(got.record.bits, bits);
    absl::StatusOr<std::vector<float>> w = TensorValues(*base, t);
    ASSERT_TRUE(w.ok());
    std::vector<float> want_values = *w;
    if (auto it = adapted.find(t.name); it != adapted.end()) {
      const std::vector<float> dw = LoraDelta(*it->second, m.adapter.scale);
      for (size_t k = 0; k < dw.size(); ++k) want_values[k] += dw[k];
    }
    const CqShape s{uint32_t(t.rows()), uint32_t(t.cols()), t.record.group, bits};
    EXPECT_EQ(got.bytes,
              PackBlob(QuantizeMatrix(want_values.data(), s, base->CodebookFor(bits, s.group))));
    ++checked;
  }
  EXPECT_GT(checked, adapted.size());
  EXPECT_EQ(m.report.Count(TensorAction::kRequantized), checked);
}

TEST(Lora, LargeUpdatesSurviveQuantization) {
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(base.ok());
  Generated gen = Generate(base->geometry(), 0.05f);
  Merged m = Merge(*base, gen.peft, gen.config, 50.0);  // dW several times |W|
  size_t merged = 0;
  for (const TensorOutcome& t : m.report.tensors)
    if (t.lora) {
      ++merged;
      EXPECT_GT(t.lora->update_rel, 1.0) << t.name;
      EXPECT_GT(t.lora->aligned, 0.8) << t.name;
      EXPECT_GT(t.lora->survived, 0.8) << t.name;
    }
  EXPECT_EQ(merged, 6u);
}

TEST(Lora, AnUpdateBelowTheQuantizationStepIsFlagged) {
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(base.ok());
  Generated gen = Generate(base->geometry(), 0.05f);
  Merged m = Merge(*base, gen.peft, gen.config, 1e-5);  // --scale 1e-5
  EXPECT_EQ(m.adapter.scale_source, "--scale");
  size_t weak = 0;
  for (const TensorOutcome& t : m.report.tensors)
    if (t.lora) {
      EXPECT_LT(t.lora->update_rel, 1e-3) << t.name;
      EXPECT_LT(t.lora->survived, 0.5) << t.name;  // the codes barely move
      weak += t.lora->aligned < 0.5;
    }
  EXPECT_EQ(weak, 6u);
  bool flagged = false;
  for (const std::string& n : m.report.notes)
    flagged |= n.find("may behave like the base") != std::string::npos;
  EXPECT_TRUE(flagged);
}

TEST(Lora, ScaleFromConfigAndRsLora) {
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(base.ok());
  Generated gen = Generate(base->geometry(), 0.05f);
  absl::StatusOr<LoraAdapter> rs =
      ParseLoraAdapter(gen.peft, "a", R"({"r": 4, "lora_alpha": 8, "use_rslora": true})",
                       std::nullopt, base->geometry());
  ASSERT_TRUE(rs.ok());
  EXPECT_EQ(rs->scale, 4.0);  // 8 / sqrt(4)
  EXPECT_NE(rs->scale_source.find("use_rslora"), std::string::npos);
}

TEST(Lora, AdapterValidationNamesTheKey) {
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("tiny", "model.cact"));
  ASSERT_TRUE(base.ok());
  const Geometry& g = base->geometry();
  Generated gen = Generate(g, 0.05f);
  auto expect = [&](Safetensors st, const std::string& config, const std::string& want) {
    absl::StatusOr<LoraAdapter> ad =
        ParseLoraAdapter(st, "adapter.safetensors", config, std::nullopt, g);
    ASSERT_FALSE(ad.ok()) << want;
    EXPECT_NE(ad.status().message().find(want), std::string::npos) << ad.status().message();
  };
  const std::string q0 = "base_model.model.model.layers.0.self_attn.q_proj";
  {
    Safetensors st = gen.peft;
    FloatTensor* a = const_cast<FloatTensor*>(st.Find(q0 + ".lora_A.weight"));
    a->shape = {kRank, 64};
    a->data.resize(kRank * 64);
    expect(st, gen.config, "key '" + q0 + ".lora_A.weight' has shape [4, 64], expected [r, 128]");
  }
  {
    Safetensors st = gen.peft;
    for (FloatTensor& t : st.tensors)
      if (t.name.starts_with(q0)) t.name.replace(t.name.find("layers.0."), 9, "layers.7.");
    expect(st, gen.config, "layer 7 but the model has 4 layers");
  }
  {
    Safetensors st = gen.peft;
    std::erase_if(st.tensors,
                  [&](const FloatTensor& t) { return t.name == q0 + ".lora_B.weight"; });
    expect(st, gen.config, "key '" + q0 + ".lora_A.weight' has no matching lora_B weight");
  }
  {
    Safetensors st = gen.peft;
    st.tensors.push_back(
        FloatTensor{"base_model.model.model.layers.0.mlp.up_proj.lora_A.weight", {1}, {0}, "F32"});
    expect(st, gen.config,
           "key 'base_model.model.model.layers.0.mlp.up_proj.lora_A.weight' is not a LoRA weight");
  }
  {
    Safetensors st = gen.peft;
    st.tensors.push_back(gen.stacked.tensors[0]);
    expect(st, gen.config, "mixes PEFT keys and stacked keys");
  }
  expect(gen.peft, "", "no LoRA scale");
  expect(gen.peft, R"({"r": 8, "lora_alpha": 16})",
         "adapter config r = 8 but the adapter's matrices have rank 4");
  {
    Safetensors st = gen.stacked;
    FloatTensor* b = const_cast<FloatTensor*>(st.Find("v_proj.B"));
    b->shape = {g.num_layers, kRank, 99};
    b->data.resize(size_t(g.num_layers) * kRank * 99);
    expect(st, "", "key 'v_proj.B' has shape [4, 4, 99], expected [4, 4, 64]");
  }
}

}  // namespace
}  // namespace cact
