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

using testing::Newlines;
using testing::TempDir;
using testing::Tool;

using testing::QuantTool;

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
    auto r =
        testing::Run(QuantTool() + " codebook --bits " + bits + " --group " + group + " --json");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    nlohmann::json j = nlohmann::json::parse(r.output);
    EXPECT_EQ(j["hex"], value["hex"]) << key;
    EXPECT_EQ(j["decimal"], value["decimal"]) << key;
    ++checked;
  }
  EXPECT_EQ(checked, 16u);
  auto text = testing::Run(QuantTool() + " codebook --bits 4 --group 128");
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_NE(text.output.find("0xbe7547c2"), std::string::npos) << text.output;  // CQ4 g128 entry 0
  auto bad = testing::Run(QuantTool() + " codebook --bits 5 --group 128");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.output.find("--bits 5 is not one of 2, 3, 4, 1.58"), std::string::npos)
      << bad.output;
}

class QuantCliFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(QuantCliFixture, BuildFromWeightsReproducesTheExporter) {
  const std::string kase = GetParam();
  TempDir dir;
  auto r =
      testing::Run(QuantTool() + " build --weights " + Fixture(kase, "weights.safetensors") +
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
  auto d = testing::Run(QuantTool() + " dequant " + Fixture(kase, "model.cact") + " -o " +
                        dir / "w.safetensors");
  ASSERT_EQ(d.exit_code, 0) << d.output;
  const std::vector<uint8_t> want = ReadAll(Fixture(kase, "model.cact"));
  auto b = testing::Run(QuantTool() + " build --weights " + dir / "w.safetensors" + " --base " +
                        Fixture(kase, "model.cact") + " -o " + dir / "rt.cact --json 2>/dev/null");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(ReadAll(dir / "rt.cact"), want);
  nlohmann::json j = nlohmann::json::parse(b.output);
  EXPECT_EQ(j["counts"]["kept"], j["tensors"].size() - 1);
  EXPECT_EQ(j["counts"]["quantized"], 0);
  // Output .zst, and a .zst base as input.
  auto z = testing::Run(QuantTool() + " build -q --weights " + dir / "w.safetensors" + " --base " +
                        Fixture(kase, "model.cact") + " -o " + dir / "rt.cact.zst");
  ASSERT_EQ(z.exit_code, 0) << z.output;
  EXPECT_NE(z.output.find("zstd            "), std::string::npos) << z.output;
  auto z2 = testing::Run(QuantTool() + " build -q --exact --weights " + dir / "w.safetensors" +
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
  auto r = testing::Run(QuantTool() + " build --dry-run --weights " +
                        Fixture("odd", "weights.safetensors") + " --tokenizer " +
                        Fixture("odd", "tokenizer.model") + " --scheme embedding=4,default=3 -o " +
                        dir / "x.cact --json");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_TRUE(Listing(dir).empty());
  nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_TRUE(j["dry_run"].get<bool>());
  EXPECT_EQ(j["scheme"], "embedding=4,default=3");
  // The planned size is the size the real build then writes.
  auto real =
      testing::Run(QuantTool() + " build -q --weights " + Fixture("odd", "weights.safetensors") +
                   " --tokenizer " + Fixture("odd", "tokenizer.model") +
                   " --scheme embedding=4,default=3 -o " + dir / "x.cact");
  ASSERT_EQ(real.exit_code, 0) << real.output;
  EXPECT_EQ(j["file_bytes"].get<uint64_t>(), ReadAll(dir / "x.cact").size());
}

TEST(QuantCli, ErrorsAreOneLineExitTwoAndLeaveNoOutput) {
  TempDir dir;
  const std::string weights = Fixture("tiny", "weights.safetensors"),
                    tok = Fixture("tiny", "tokenizer.model");
  // A malformed scheme is reported before any work.
  auto bad_scheme = testing::Run(QuantTool() + " build --weights " + weights + " --tokenizer " +
                                 tok + " --scheme embedding=4,mhc=5 -o " + dir / "a.cact");
  EXPECT_EQ(bad_scheme.exit_code, 2);
  EXPECT_EQ(bad_scheme.output,
            "cact-quant: scheme \"embedding=4,mhc=5\": entry 2 \"mhc=5\" (at character 13): width "
            "\"5\" is not one of "
            "2, 3, 4, 1.58\n");
  // A truncated base file.
  std::vector<uint8_t> base = ReadAll(Fixture("tiny", "model.cact"));
  base.resize(base.size() / 2);
  testing::WriteAll(dir / "truncated.cact", base);
  auto bad_base = testing::Run(QuantTool() + " build --weights " + weights + " --base " +
                               dir / "truncated.cact" + " -o " + dir / "b.cact");
  EXPECT_EQ(bad_base.exit_code, 2);
  EXPECT_EQ(std::count(bad_base.output.begin(), bad_base.output.end(), '\n'), 1) << bad_base.output;
  EXPECT_NE(bad_base.output.find("truncated.cact"), std::string::npos) << bad_base.output;
  // Weights missing a tensor: the error names it.
  absl::StatusOr<Safetensors> w = ReadSafetensors(weights);
  ASSERT_TRUE(w.ok());
  std::erase_if(w->tensors, [](const FloatTensor& t) { return t.name == "engram1.taps"; });
  ASSERT_TRUE(WriteSafetensors(dir / "partial.safetensors", *w).ok());
  auto missing = testing::Run(QuantTool() + " build --weights " + dir / "partial.safetensors" +
                              " --tokenizer " + tok + " -o " + dir / "c.cact");
  EXPECT_EQ(missing.exit_code, 2);
  EXPECT_EQ(missing.output,
            "cact-quant: " + dir / "partial.safetensors" + ": tensor 'engram1.taps' is missing\n");
  // An existing output is left untouched by a failing run.
  testing::WriteAll(dir / "keep.cact", {1, 2, 3});
  auto over = testing::Run(QuantTool() + " build --weights " + dir / "partial.safetensors" +
                           " --tokenizer " + tok + " -o " + dir / "keep.cact");
  EXPECT_EQ(over.exit_code, 2);
  EXPECT_EQ(ReadAll(dir / "keep.cact"), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(Listing(dir),
            (std::set<std::string>{"truncated.cact", "partial.safetensors", "keep.cact"}));
  // Requant and lora check their inputs too.
  EXPECT_EQ(testing::Run(QuantTool() + " requant " + dir / "truncated.cact --scheme default=2 -o " +
                         dir / "d.cact")
                .exit_code,
            2);
  EXPECT_EQ(testing::Run(QuantTool() + " lora " + Fixture("tiny", "model.cact") + " --adapter " +
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

  auto p = testing::Run(QuantTool() + " lora " + Fixture("odd", "model.cact") + " --adapter " +
                        dir / "peft.safetensors" + " --adapter-config " +
                        dir / "adapter_config.json" + " -o " + dir / "peft.cact");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_NE(p.output.find("layer03.k_proj"), std::string::npos);
  EXPECT_NE(p.output.find("survived"), std::string::npos) << p.output;
  auto s = testing::Run(QuantTool() + " lora " + Fixture("odd", "model.cact") + " --adapter " +
                        dir / "stacked.safetensors" + " -o " + dir / "stacked.cact --json");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  nlohmann::json j = nlohmann::json::parse(s.output);
  EXPECT_EQ(j["counts"]["re-encoded"], 2);
  for (auto& t : j["tensors"])
    if (t["action"] == "re-encoded") {
      EXPECT_TRUE(touched.count(t["name"].get<std::string>())) << t["name"];
      EXPECT_GT(t["lora"]["update_rel"].get<double>(), 0.0);
      EXPECT_GT(t["groups"]["reencoded"].get<int>(), 0);
    }
  EXPECT_EQ(ReadAll(dir / "peft.cact"), ReadAll(dir / "stacked.cact"));
  // --exporter-rule: the same two tensors quantized afresh (other bytes than the re-encoding).
  auto e = testing::Run(QuantTool() + " lora " + Fixture("odd", "model.cact") + " --adapter " +
                        dir / "stacked.safetensors" + " --exporter-rule -o " +
                        dir / "exporter.cact --json");
  ASSERT_EQ(e.exit_code, 0) << e.output;
  nlohmann::json je = nlohmann::json::parse(e.output);
  EXPECT_EQ(je["counts"]["requantized"], 2);
  EXPECT_EQ(je["counts"]["re-encoded"], 0);
  EXPECT_NE(ReadAll(dir / "exporter.cact"), ReadAll(dir / "stacked.cact"));

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
  auto r = testing::Run(QuantTool() + " requant " + Fixture("tiny", "model.cact") +
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
  auto r =
      testing::Run(QuantTool() + " synth --geometry needle2 --seed 1 -o " + dir / "n2.cact --json");
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


// ---- Inputs are never lost; writes that fail exit 2 ----

// A rank-2 PEFT adapter of layer 1's q_proj for `model` (values ~0.01: |dW|/|W| small at the
// config's scale 1), written as a PEFT directory: adapter_model.safetensors +
// adapter_config.json.
void WritePeftAdapter(const std::string& model, const std::string& dir) {
  absl::StatusOr<CactFile> base = CactFile::Open(model);
  ASSERT_TRUE(base.ok()) << base.status();
  const Geometry& g = base->geometry();
  const uint32_t r = 2, in = g.d_model, out = g.attn_dim();
  const std::string key = "base_model.model.model.layers.1.self_attn.q_proj.lora_";
  Safetensors st;
  st.tensors.push_back({key + "A.weight", {r, in}, std::vector<float>(r * in), "F32"});
  st.tensors.push_back({key + "B.weight", {out, r}, std::vector<float>(out * r), "F32"});
  uint32_t seed = 7;
  for (FloatTensor& t : st.tensors)
    for (float& v : t.data)
      v = float(int((seed = seed * 1103515245u + 12345u) >> 16) % 2001 - 1000) * 1e-5f;
  std::filesystem::create_directories(dir);
  ASSERT_TRUE(WriteSafetensors(dir + "/adapter_model.safetensors", st).ok());
  std::ofstream(dir + "/adapter_config.json") << R"({"peft_type": "LORA", "r": 2, "lora_alpha": 2})";
}

TEST(QuantCli, AnOutputThatIsAnInputIsRefusedBeforeAnyWork) {
  TempDir dir;
  const std::string model = dir / "m.cact";
  testing::WriteAll(model, ReadAll(Fixture("tiny", "model.cact")));
  const std::vector<uint8_t> before = ReadAll(model);
  std::filesystem::create_hard_link(model, dir / "hard.cact");
  std::filesystem::create_symlink(model, dir / "soft.cact");
  WritePeftAdapter(model, dir / "peft");
  for (const std::string& out : {model, dir / "hard.cact", dir / "soft.cact", dir / "./m.cact"}) {
    const std::vector<std::string> commands = {
        " dequant " + model + " -o " + out,
        " requant " + model + " --preset cq4 -o " + out,
        " lora " + model + " --adapter " + dir / "peft" + " -o " + out,
        " build --weights " + Fixture("tiny", "weights.safetensors") + " --base " + model +
            " -o " + out,
    };
    for (const std::string& c : commands) {
      auto r = testing::Run(QuantTool() + c);
      EXPECT_EQ(r.exit_code, 2) << c << "\n" << r.output;
      EXPECT_EQ(Newlines(r.output), 1u) << c << "\n" << r.output;
      EXPECT_NE(r.output.find("is an input of this command"), std::string::npos) << r.output;
      EXPECT_EQ(ReadAll(model), before) << c;
    }
  }
  // The files inside a PEFT directory are inputs too, and so is --weights-out's source.
  const std::vector<uint8_t> config = ReadAll(dir / "peft/adapter_config.json");
  auto cfg = testing::Run(QuantTool() + " lora " + model + " --adapter " + dir / "peft" + " -o " +
                          dir / "peft/adapter_config.json");
  EXPECT_EQ(cfg.exit_code, 2) << cfg.output;
  EXPECT_EQ(ReadAll(dir / "peft/adapter_config.json"), config);
  auto weights_out = testing::Run(QuantTool() + " synth --geometry small -q -o " + dir / "s.cact" +
                                  " --weights-out " + dir / "s.cact");
  EXPECT_EQ(weights_out.exit_code, 2) << weights_out.output;
  EXPECT_TRUE(std::filesystem::is_symlink(dir / "soft.cact"));
}

TEST(QuantCli, AFailedWriteExitsTwoNamingThePath) {
  // /dev/full exists on every Linux this project supports: without it this test cannot run.
  ASSERT_TRUE(std::filesystem::is_character_file("/dev/full"));
  const std::vector<std::string> commands = {
      " requant " + Fixture("tiny", "model.cact") + " --preset cq4 -q -o /dev/full",
      " dequant " + Fixture("tiny", "model.cact") + " -o /dev/full",
      " synth --geometry small -q -o /dev/full",
  };
  for (const std::string& c : commands) {
    auto r = testing::Run(QuantTool() + c);
    EXPECT_EQ(r.exit_code, 2) << c << "\n" << r.output;
    EXPECT_NE(r.output.find("cact-quant: /dev/full: "), std::string::npos) << r.output;
  }
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
}

// ---- Flags ----

TEST(QuantCli, KvWindowMustFitTheModel) {
  TempDir dir;
  const std::string model = Fixture("tiny", "model.cact");
  absl::StatusOr<CactFile> in = CactFile::Open(model);
  ASSERT_TRUE(in.ok());
  const uint32_t max = in->geometry().max_seq_len;
  for (const std::string& bad :
       std::vector<std::string>{"0", "-1", "x", std::to_string(max + 1), "99999999"}) {
    auto r = testing::Run(QuantTool() + " requant " + model + " --preset cq4 -q --kv-window " +
                          bad + " -o " + dir / "w.cact");
    EXPECT_EQ(r.exit_code, 2) << bad << ": " << r.output;
    EXPECT_EQ(Newlines(r.output), 1u) << r.output;
    EXPECT_NE(r.output.find("--kv-window"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "w.cact"));
  }
  auto over = testing::Run(QuantTool() + " synth --geometry small -q --kv-window 99999999 -o " +
                           dir / "w.cact");
  EXPECT_EQ(over.exit_code, 2) << over.output;
  EXPECT_NE(over.output.find("max_seq_len"), std::string::npos) << over.output;
  auto ok = testing::Run(QuantTool() + " requant " + model + " --preset cq4 -q --kv-window " +
                         std::to_string(max) + " -o " + dir / "w.cact");
  ASSERT_EQ(ok.exit_code, 0) << ok.output;
  absl::StatusOr<CactFile> out = CactFile::Open(dir / "w.cact");
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(out->geometry().kv_window, max);
}

TEST(QuantCli, ScalesAndTolerancesMustBeFinite) {
  TempDir dir;
  WritePeftAdapter(Fixture("tiny", "model.cact"), dir / "peft");
  const std::vector<std::string> commands = {
      " lora " + Fixture("tiny", "model.cact") + " --adapter " + dir / "peft" + " --scale nan",
      " lora " + Fixture("tiny", "model.cact") + " --adapter " + dir / "peft" + " --scale inf",
      " build --checkpoint c.pkl --lora a.pkl --tokenizer t.model --scale nan",
      " convert c.pkl --lora a.pkl --scale -inf",
      " build --weights " + Fixture("tiny", "weights.safetensors") + " --base " +
          Fixture("tiny", "model.cact") + " --keep-tolerance nan",
      " build --weights " + Fixture("tiny", "weights.safetensors") + " --base " +
          Fixture("tiny", "model.cact") + " --keep-tolerance 2",
  };
  for (const std::string& c : commands) {
    auto r = testing::Run(QuantTool() + c + " -o " + dir / "x.out");
    EXPECT_EQ(r.exit_code, 2) << c << "\n" << r.output;
    EXPECT_EQ(Newlines(r.output), 1u) << r.output;
    EXPECT_NE(r.output.find("must be finite"), std::string::npos) << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "x.out"));
}

TEST(QuantCli, SynthTakesItsGeometryAsGeometry) {
  TempDir dir;
  auto g = testing::Run(QuantTool() + " synth --geometry small --seed 2 -q -o " + dir / "g.cact");
  ASSERT_EQ(g.exit_code, 0) << g.output;
  // The old name still works, and is not advertised.
  auto p = testing::Run(QuantTool() + " synth --preset small --seed 2 -q -o " + dir / "p.cact");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  EXPECT_EQ(ReadAll(dir / "g.cact"), ReadAll(dir / "p.cact"));
  auto help = testing::Run(QuantTool() + " synth --help");
  EXPECT_NE(help.output.find("--geometry"), std::string::npos) << help.output;
  EXPECT_EQ(help.output.find("--preset"), std::string::npos) << help.output;
  auto bad = testing::Run(QuantTool() + " synth --geometry nope -o " + dir / "n.cact");
  EXPECT_EQ(bad.exit_code, 2) << bad.output;
}

TEST(QuantCli, DequantTakesQuietAndDryRunLikeEveryCommand) {
  TempDir dir;
  auto dry = testing::Run(QuantTool() + " dequant -q --dry-run " + Fixture("tiny", "model.cact") +
                          " -o " + dir / "w.safetensors");
  ASSERT_EQ(dry.exit_code, 0) << dry.output;
  EXPECT_NE(dry.output.find("dry run, nothing written"), std::string::npos) << dry.output;
  EXPECT_TRUE(Listing(dir).empty());
  auto q = testing::Run(QuantTool() + " dequant -q " + Fixture("tiny", "model.cact") + " -o " +
                        dir / "w.safetensors");
  ASSERT_EQ(q.exit_code, 0) << q.output;
  EXPECT_TRUE(ReadSafetensors(dir / "w.safetensors").ok());
}

TEST(QuantCli, EveryHelpShowsAnExample) {
  for (const std::string c :
       {"", "codebook", "build", "requant", "presets", "lora", "synth", "dequant", "convert"}) {
    auto r = testing::Run(QuantTool() + " " + c + " --help");
    EXPECT_EQ(r.exit_code, 0) << c;
    EXPECT_NE(r.output.find("Example:\n  cact-quant " + c), std::string::npos) << r.output;
  }
}

// ---- LoRA: updates that are finite and of a sane size ----

TEST(QuantCli, AFarTooLargeLoraUpdateIsRefusedUnlessAllowed) {
  TempDir dir;
  const std::string model = Fixture("tiny", "model.cact");
  WritePeftAdapter(model, dir / "peft");
  const std::string lora = QuantTool() + " lora " + model + " --adapter " + dir / "peft";
  for (const std::string scale : {"1e5", "-1e30"}) {
    auto r = testing::Run(lora + " -q --scale " + scale + " -o " + dir / "big.cact");
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(Newlines(r.output), 1u) << r.output;
    EXPECT_NE(r.output.find("tensor 'layer01.q_proj': the LoRA update is far larger than the "
                            "weight (|dW|/|W| = "),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("--allow-large-update"), std::string::npos) << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "big.cact"));
  }
  // A normal merge is far below the bound; a large one goes through when asked for.
  auto normal = testing::Run(lora + " --json -o " + dir / "normal.cact");
  ASSERT_EQ(normal.exit_code, 0) << normal.output;
  const nlohmann::json normal_report = nlohmann::json::parse(normal.output);
  size_t merged = 0;
  for (const auto& t : normal_report["tensors"]) {
    if (t.contains("lora")) {
      EXPECT_LT(t["lora"]["update_rel"].get<double>(), 0.5) << t;
      ++merged;
    }
  }
  EXPECT_EQ(merged, 1u);  // layer01.q_proj
  auto allowed = testing::Run(lora + " --json --scale 1e5 --allow-large-update -o " +
                              dir / "big.cact");
  ASSERT_EQ(allowed.exit_code, 0) << allowed.output;
  const nlohmann::json allowed_report = nlohmann::json::parse(allowed.output);
  merged = 0;
  for (const auto& t : allowed_report["tensors"]) {
    if (t.contains("lora")) {
      EXPECT_GT(t["lora"]["update_rel"].get<double>(), 10.0) << t;
      ++merged;
    }
  }
  EXPECT_EQ(merged, 1u);
  // Never a non-finite value, even when allowed: refused naming the tensor.
  auto inf = testing::Run(lora + " -q --scale 1e300 --allow-large-update -o " + dir / "inf.cact");
  EXPECT_EQ(inf.exit_code, 2) << inf.output;
  EXPECT_NE(inf.output.find("tensor 'layer01.q_proj'"), std::string::npos) << inf.output;
  EXPECT_NE(inf.output.find("non-finite"), std::string::npos) << inf.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "inf.cact"));
}

TEST(QuantCli, LoraTakesAPeftDirectoryAndTheConfigBesideTheWeights) {
  TempDir dir;
  const std::string model = Fixture("tiny", "model.cact");
  WritePeftAdapter(model, dir / "peft");
  auto given = testing::Run(QuantTool() + " lora -q " + model + " --adapter " +
                            dir / "peft/adapter_model.safetensors" + " --adapter-config " +
                            dir / "peft/adapter_config.json" + " -o " + dir / "given.cact");
  ASSERT_EQ(given.exit_code, 0) << given.output;
  auto directory = testing::Run(QuantTool() + " lora -q " + model + " --adapter " + dir / "peft" +
                                " -o " + dir / "dir.cact");
  ASSERT_EQ(directory.exit_code, 0) << directory.output;
  EXPECT_NE(directory.output.find("found beside the adapter"), std::string::npos)
      << directory.output;
  auto beside = testing::Run(QuantTool() + " lora -q " + model + " --adapter " +
                             dir / "peft/adapter_model.safetensors" + " -o " + dir / "file.cact");
  ASSERT_EQ(beside.exit_code, 0) << beside.output;
  EXPECT_EQ(ReadAll(dir / "dir.cact"), ReadAll(dir / "given.cact"));
  EXPECT_EQ(ReadAll(dir / "file.cact"), ReadAll(dir / "given.cact"));
  // A directory without the weights: one line saying what a PEFT directory holds.
  std::filesystem::create_directories(dir / "empty");
  auto empty = testing::Run(QuantTool() + " lora " + model + " --adapter " + dir / "empty" +
                            " -o " + dir / "e.cact");
  EXPECT_EQ(empty.exit_code, 2) << empty.output;
  EXPECT_EQ(empty.output, "cact-quant: " + dir / "empty" +
                              ": is a directory without adapter_model.safetensors (a PEFT "
                              "adapter directory holds adapter_model.safetensors and "
                              "adapter_config.json)\n");
}

// ---- A file of the wrong kind says so ----

TEST(QuantCli, ACactWhereAnotherFileBelongsIsNamedAsSuch) {
  TempDir dir;
  const std::string model = Fixture("tiny", "model.cact");
  auto tok =
      testing::Run(QuantTool() + " build --weights " + Fixture("tiny", "weights.safetensors") +
                   " --tokenizer " + model + " -o " + dir / "x.cact");
  EXPECT_EQ(tok.exit_code, 2) << tok.output;
  EXPECT_EQ(tok.output, "cact-quant: " + model +
                            ": is a .cact model, not a SentencePiece .model (use --base to take "
                            "its tokenizer)\n");
  auto weights = testing::Run(QuantTool() + " build --weights " + model + " --tokenizer " +
                              Fixture("tiny", "tokenizer.model") + " -o " + dir / "x.cact");
  EXPECT_EQ(weights.exit_code, 2) << weights.output;
  EXPECT_EQ(Newlines(weights.output), 1u) << weights.output;
  EXPECT_NE(weights.output.find(model + ": is a .cact model (it starts with the .cact tag), not "
                                        "a safetensors file"),
            std::string::npos)
      << weights.output;
  // Any other file: its first bytes are no header length, and the file size says so.
  std::ofstream(dir / "notes.json") << R"({"not": "weights"})";
  auto json =
      testing::Run(QuantTool() + " build --weights " + dir / "notes.json" + " --tokenizer " +
                   Fixture("tiny", "tokenizer.model") + " -o " + dir / "x.cact");
  EXPECT_EQ(json.exit_code, 2) << json.output;
  EXPECT_NE(json.output.find("not a safetensors file"), std::string::npos) << json.output;
  auto json_tok =
      testing::Run(QuantTool() + " build --weights " + Fixture("tiny", "weights.safetensors") +
                   " --tokenizer " + dir / "notes.json" + " -o " + dir / "x.cact");
  EXPECT_EQ(json_tok.exit_code, 2) << json_tok.output;
  EXPECT_NE(json_tok.output.find("not a SentencePiece .model"), std::string::npos)
      << json_tok.output;
  EXPECT_FALSE(std::filesystem::exists(dir / "x.cact"));
}

}  // namespace
}  // namespace cact
