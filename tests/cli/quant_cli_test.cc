// cact-quant from the command line: codebooks, builds that reproduce the fixtures, the
// dequant -> build --base round trip (also through .zst), dry runs, LoRA in both layouts,
// requant, the synthetic needle2 model, and errors that leave no output.
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/str_format.h"
#include "formats/cact/accounting.h"
#include "formats/cact/cact_file.h"
#include "formats/safetensors.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/needle2_accounting.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::ReadAll;

using testing::TempDir;
using testing::Tool;

std::string Quant() { return Tool("cact-quant"); }

// Files left in a directory (an aborted write must leave neither output nor temp file).
std::set<std::string> Listing(const TempDir& dir) {
  std::set<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    names.insert(e.path().filename());
  return names;
}

TEST(QuantCli, CodebookEqualsCodebooksJson) {
  std::ifstream f(Fixture("tiny", "codebooks.json"));
  nlohmann::json books = nlohmann::json::parse(f)["codebooks"];
  size_t checked = 0;
  for (auto& [key, value] : books.items()) {
    const size_t us = key.find("_group");
    const std::string bits = key.substr(4, us - 4), group = key.substr(us + 6);
    auto r = testing::Run(Quant() + " codebook --bits " + bits + " --group " + group + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    nlohmann::json j = nlohmann::json::parse(r.output);
    EXPECT_EQ(j["hex"], value["hex"]) << key;
    EXPECT_EQ(j["decimal"], value["decimal"]) << key;
    ++checked;
  }
  EXPECT_EQ(checked, 16u);
  auto text = testing::Run(Quant() + " codebook --bits 4 --group 128");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.output.find("0xbe7547c2"), std::string::npos) << text.output;  // CQ4 g128 entry 0
  auto bad = testing::Run(Quant() + " codebook --bits 5 --group 128");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--bits 5 is not one of 2, 3, 4, 1.58"), std::string::npos)
      << bad.output;
}

class QuantCliFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantCliFixture, BuildFromWeightsReproducesTheExporter) {
  const std::string kase = GetParam();
  TempDir dir;
  auto r =
      testing::Run(Quant() + " build --weights " + Fixture(kase, "weights.safetensors") +
                   " --tokenizer " + Fixture(kase, "tokenizer.model") + " -o " + dir / "out.cact");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(ReadAll(dir / "out.cact"), ReadAll(Fixture(kase, "model.cact")));
  // llama-quantize style lines, then the summary.
  EXPECT_NE(r.output.find("] embedding"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("-> CQ4 g128   rel-mse 0."), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("  file            " +
                          std::to_string(ReadAll(Fixture(kase, "model.cact")).size()) + " B"),
            std::string::npos)
      << r.output;
}

TEST_P(QuantCliFixture, DequantThenBuildAgainstBaseIsByteIdenticalAlsoThroughZstd) {
  const std::string kase = GetParam();
  TempDir dir;
  auto d = testing::Run(Quant() + " dequant " + Fixture(kase, "model.cact") + " -o " +
                        dir / "w.safetensors");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  const std::vector<uint8_t> want = ReadAll(Fixture(kase, "model.cact"));
  auto b = testing::Run(Quant() + " build --weights " + dir / "w.safetensors" + " --base " +
                        Fixture(kase, "model.cact") + " -o " + dir / "rt.cact --json 2>/dev/null");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(ReadAll(dir / "rt.cact"), want);
  nlohmann::json j = nlohmann::json::parse(b.output);
  EXPECT_EQ(j["counts"]["kept"], j["tensors"].size() - 1);
  EXPECT_EQ(j["counts"]["quantized"], 0);
  // Output .zst, and a .zst base as input.
  auto z = testing::Run(Quant() + " build -q --weights " + dir / "w.safetensors" + " --base " +
                        Fixture(kase, "model.cact") + " -o " + dir / "rt.cact.zst");
  ASSERT_EQ(z.exit_code, 0) << z.output;
  EXPECT_NE(z.output.find("zstd            "), std::string::npos) << z.output;
  auto z2 = testing::Run(Quant() + " build -q --exact --weights " + dir / "w.safetensors" +
                         " --base " + dir / "rt.cact.zst" + " -o " + dir / "rt2.cact");
  ASSERT_EQ(z2.exit_code, 0) << z2.output;
  EXPECT_EQ(ReadAll(dir / "rt2.cact"), want);
  auto unz = testing::Run("zstd -dc " + dir / "rt.cact.zst" + " > " + dir / "unz.cact");
  ASSERT_EQ(unz.exit_code, 0) << unz.output;
  EXPECT_EQ(ReadAll(dir / "unz.cact"), want);
}

INSTANTIATE_TEST_SUITE_P(Fixtures, QuantCliFixture, ::testing::ValuesIn(testing::FixtureCases()));

TEST(QuantCli, DryRunPrintsThePlanAndWritesNothing) {
  TempDir dir;
  auto r =
      testing::Run(Quant() + " build --dry-run --weights " + Fixture("odd", "weights.safetensors") +
                   " --tokenizer " + Fixture("odd", "tokenizer.model") +
                   " --scheme embedding=4,default=3 -o " + dir / "x.cact --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Listing(dir).empty());
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_TRUE(j["dry_run"].get<bool>());
  EXPECT_EQ(j["scheme"], "embedding=4,default=3");
  // The planned size is the size the real build then writes.
  auto real = testing::Run(
      Quant() + " build -q --weights " + Fixture("odd", "weights.safetensors") + " --tokenizer " +
      Fixture("odd", "tokenizer.model") + " --scheme embedding=4,default=3 -o " + dir / "x.cact");
  ASSERT_EQ(real.exit_code, 0) << real.output;
  EXPECT_EQ(j["file_bytes"].get<uint64_t>(), ReadAll(dir / "x.cact").size());
}

TEST(QuantCli, ErrorsAreOneLineExitTwoAndLeaveNoOutput) {
  TempDir dir;
  const std::string weights = Fixture("tiny", "weights.safetensors"),
                    tok = Fixture("tiny", "tokenizer.model");
  // A malformed scheme is reported before any work.
  auto bad_scheme = testing::Run(Quant() + " build --weights " + weights + " --tokenizer " + tok +
                                 " --scheme embedding=4,mhc=5 -o " + dir / "a.cact");
  EXPECT_EQ(bad_scheme.exit_code, 2);
  EXPECT_EQ(bad_scheme.output,
            "cact-quant: scheme \"embedding=4,mhc=5\": entry 2 \"mhc=5\" (at character 13): width "
            "\"5\" is not one of "
            "2, 3, 4, 1.58\n");
  // A truncated base file.
  std::vector<uint8_t> base = ReadAll(Fixture("tiny", "model.cact"));
  base.resize(base.size() / 2);
  testing::WriteAll(dir / "truncated.cact", base);
  auto bad_base = testing::Run(Quant() + " build --weights " + weights + " --base " +
                               dir / "truncated.cact" + " -o " + dir / "b.cact");
  EXPECT_EQ(bad_base.exit_code, 2);
  EXPECT_EQ(std::count(bad_base.output.begin(), bad_base.output.end(), '\n'), 1) << bad_base.output;
  EXPECT_NE(bad_base.output.find("truncated.cact"), std::string::npos) << bad_base.output;
  // Weights missing a tensor: the error names it.
  absl::StatusOr<Safetensors> w = ReadSafetensors(weights);
  ASSERT_TRUE(w.ok());
  std::erase_if(w->tensors, [](const FloatTensor& t) { return t.name == "engram1.taps"; });
  ASSERT_TRUE(WriteSafetensors(dir / "partial.safetensors", *w).ok());
  auto missing = testing::Run(Quant() + " build --weights " + dir / "partial.safetensors" +
                              " --tokenizer " + tok + " -o " + dir / "c.cact");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.output,
            "cact-quant: " + dir / "partial.safetensors" + ": tensor 'engram1.taps' is missing\n");
  // An existing output is left untouched by a failing run.
  testing::WriteAll(dir / "keep.cact", {1, 2, 3});
  auto over = testing::Run(Quant() + " build --weights " + dir / "partial.safetensors" +
                           " --tokenizer " + tok + " -o " + dir / "keep.cact");
  EXPECT_EQ(over.exit_code, 2);
  EXPECT_EQ(ReadAll(dir / "keep.cact"), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(Listing(dir),
            (std::set<std::string>{"truncated.cact", "partial.safetensors", "keep.cact"}));
  // Requant and lora check their inputs too.
  EXPECT_EQ(testing::Run(Quant() + " requant " + dir / "truncated.cact --scheme default=2 -o " +
                         dir / "d.cact")
                .exit_code,
            2);
  EXPECT_EQ(testing::Run(Quant() + " lora " + Fixture("tiny", "model.cact") + " --adapter " +
                         weights + " -o " + dir / "e.cact")
                .exit_code,
            2);
  EXPECT_EQ(Listing(dir),
            (std::set<std::string>{"truncated.cact", "partial.safetensors", "keep.cact"}));
}

TEST(QuantCli, LoraLayoutsAgreeAndTheDiffShowsTheTouchedTensors) {
  TempDir dir;
  absl::StatusOr<CactFile> base = CactFile::Open(Fixture("odd", "model.cact"));
  ASSERT_TRUE(base.ok());
  const Geometry& g = base->geometry();
  // Rank-2 update of layer 3's k_proj and gate_proj: deterministic values.
  Safetensors peft, stacked;
  std::set<std::string> touched;
  uint32_t seed = 1;
  auto next = [&] {
    return float(int((seed = seed * 1103515245u + 12345u) >> 16) % 2001 - 1000) * 1e-4f;
  };
  for (std::string p : {"k_proj", "gate_proj"}) {
    const uint32_t out = p == "k_proj" ? g.kv_dim() : g.attn_dim(), in = g.d_model, r = 2,
                   L = g.num_layers;
    FloatTensor a{
        "base_model.model.model.layers.3.self_attn." + p + ".lora_A.weight", {r, in}, {}, "F32"};
    FloatTensor b{
        "base_model.model.model.layers.3.self_attn." + p + ".lora_B.weight", {out, r}, {}, "F32"};
    FloatTensor sa{"stack/layers/block/self_attn/" + p + "/kernel/A",
                   {L, in, r},
                   std::vector<float>(L * in * r),
                   "F32"};
    FloatTensor sb{"stack/layers/block/self_attn/" + p + "/kernel/B",
                   {L, r, out},
                   std::vector<float>(L * r * out),
                   "F32"};
    for (uint32_t k = 0; k < r * in; ++k) a.data.push_back(next());
    for (uint32_t k = 0; k < out * r; ++k) b.data.push_back(next());
    for (uint32_t i = 0; i < in; ++i)
      for (uint32_t j = 0; j < r; ++j) sa.data[(3 * in + i) * r + j] = a.data[j * in + i];
    for (uint32_t j = 0; j < r; ++j)
      for (uint32_t o = 0; o < out; ++o) sb.data[(3 * r + j) * out + o] = b.data[o * r + j];
    peft.tensors.push_back(a);
    peft.tensors.push_back(b);
    stacked.tensors.push_back(sa);
    stacked.tensors.push_back(sb);
    touched.insert("layer03." + p);
  }
  stacked.metadata["scale"] = "16";
  ASSERT_TRUE(WriteSafetensors(dir / "peft.safetensors", peft).ok());
  ASSERT_TRUE(WriteSafetensors(dir / "stacked.safetensors", stacked).ok());
  testing::WriteAll(dir / "adapter_config.json", std::vector<uint8_t>{});
  std::ofstream(dir / "adapter_config.json") << R"({"r": 2, "lora_alpha": 32})";

  auto p = testing::Run(Quant() + " lora " + Fixture("odd", "model.cact") + " --adapter " +
                        dir / "peft.safetensors" + " --adapter-config " +
                        dir / "adapter_config.json" + " -o " + dir / "peft.cact");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("layer03.k_proj"), std::string::npos);
  EXPECT_NE(p.output.find("survived"), std::string::npos) << p.output;
  auto s = testing::Run(Quant() + " lora " + Fixture("odd", "model.cact") + " --adapter " +
                        dir / "stacked.safetensors" + " -o " + dir / "stacked.cact --json");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  nlohmann::json j = nlohmann::json::parse(s.output);
  EXPECT_EQ(j["counts"]["requantized"], 2);
  for (auto& t : j["tensors"])
    if (t["action"] == "requantized") {
      EXPECT_TRUE(touched.count(t["name"].get<std::string>())) << t["name"];
      EXPECT_GT(t["lora"]["update_rel"].get<double>(), 0.0);
    }
  EXPECT_EQ(ReadAll(dir / "peft.cact"), ReadAll(dir / "stacked.cact"));

  ASSERT_TOOL_BUILT("cact-inspect");
  auto diff = testing::Run(Tool("cact-inspect") + " diff --json " + Fixture("odd", "model.cact") +
                           " " + dir / "peft.cact");
  nlohmann::json dj = nlohmann::json::parse(diff.output);
  std::set<std::string> changed;
  for (auto& t : dj["tensors"])
    if (t["status"] != "identical") changed.insert(t["name"].get<std::string>());
  EXPECT_EQ(changed, touched);
}

TEST(QuantCli, RequantChangesOnlyTheAskedWidths) {
  TempDir dir;
  auto r = testing::Run(Quant() + " requant " + Fixture("tiny", "model.cact") +
                        " --scheme default=2 -o " + dir / "all2.cact" + " --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["counts"]["requantized"], 4);  // embedding + 3 mhc_phi were CQ4
  for (auto& t : j["tensors"]) {
    if (t["action"] == "requantized") {
      EXPECT_NE(t["reason"].get<std::string>().find("from the dequantized values"),
                std::string::npos);
    }
  }
  absl::StatusOr<CactFile> out = CactFile::Open(dir / "all2.cact");
  ASSERT_TRUE(out.ok()) << out.status();
  for (const TensorEntry& t : out->tensors()) {
    if (t.is_cq()) {
      EXPECT_EQ(t.record.bits, 2u) << t.name;
    }
  }
}

TEST(QuantCli, SyntheticNeedle2HasTheReleasedAccounting) {
  TempDir dir;
  auto r = testing::Run(Quant() + " synth --preset needle2 --seed 1 -o " + dir / "n2.cact --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["counts"]["quantized"], 145);
  EXPECT_EQ(j["counts"]["fp16"], 259);
  EXPECT_EQ(j["params"], 43634423);
  std::printf("needle2 synth: quantize %.3f s, whole command %.3f s\n",
              j["quantize_seconds"].get<double>(), j["seconds"].get<double>());
  absl::StatusOr<CactFile> f = CactFile::Open(dir / "n2.cact");
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(f->tensors().size(), 405u);
  Accounting a = ComputeAccounting(*f);
  // The spec's "Released file, measured" rows (the tokenizer row depends on the tokenizer).
  testing::ExpectReleasedNeedle2Classes(a);
  EXPECT_EQ(a.norm_bytes, 676096u);
}

}  // namespace
}  // namespace cact
