// Generation 3 from the command line: cact-inspect's summary, --tensors, --json, --markdown,
// verify, diff, dump and tokens read small synthetic Needle 3 files (with and without heads,
// without QKV taps); dump's CQ values equal an independent numpy reader of the file; bad
// headers exit 2 with one line; every other program refuses the file with the one line of
// formats/cact/generation.h.
#include <fstream>

#include "absl/strings/str_format.h"
#include "formats/cact/cact3_file.h"
#include "formats/le_bytes.h"
#include "gtest/gtest.h"
#include "lib/file_bytes.h"
#include "nlohmann/json.hpp"
#include "support/needle3_synthetic.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::Head3;
using testing::TempDir;
using testing::Tool;

// Every CQ width on a few records, CQ2 elsewhere.
uint32_t MixedBits(const std::string& name) {
  if (name == "embedding" || name.find("k_proj") != std::string::npos) return 4;
  if (name.find("q_proj") != std::string::npos) return 3;
  return 2;
}

class InspectNeedle3 : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TOOL_BUILT("cact-inspect");
    testing::Synth3Options o;
    o.geometry = SmallGeometry3();
    o.group = 32;
    o.bits = MixedBits;
    o.layout.heads = {Head3(ProbeHead3::kEmbedding, 2, 2, 16), Head3(ProbeHead3::kRouter, 2, 3, 3)};
    Write("heads.cact", o);
    o.layout.heads.clear();
    Write("plain.cact", o);
    o.geometry.qkv_conv_taps = 0;
    Write("notaps.cact", o);
  }
  void Write(const std::string& name, const testing::Synth3Options& o) {
    testing::WriteAll(dir_ / name, testing::SynthesizeCact3(o));
  }
  testing::CommandResult Inspect(const std::string& args) const {
    return testing::Run(Tool("cact-inspect") + " " + args);
  }
  TempDir dir_;
};

TEST_F(InspectNeedle3, SummaryNamesTheGeneration) {
  for (const char* name : {"heads.cact", "plain.cact", "notaps.cact"}) {
    SCOPED_TRACE(name);
    auto f = Cact3File::Open(dir_ / name);
    ASSERT_TRUE(f.ok()) << f.status();
    auto r = Inspect(dir_ / name);
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find(absl::StrFormat(
                  "\ngeneration  Needle 3 (generation 3, .cact tag 0x05E12A84, %d tensors)\n",
                  f->tensors().size())),
              std::string::npos)
        << r.output;
    for (const char* row : {"support ", "parameters ", "widths ", "geometry ", "attention ",
                            "blocks ", "engram ", "heads ", "tokenizer "})
      EXPECT_NE(r.output.find(std::string("\n") + row), std::string::npos) << row;
    EXPECT_NE(r.output.find("vocab 64 (output rows 48), d_model 64, 3 layers, 4/2 heads x q/k 16 "
                            "v 8"),
              std::string::npos)
        << r.output;
    EXPECT_NE(r.output.find("global layers [2]"), std::string::npos) << r.output;
    EXPECT_NE(r.output.find("whole file"), std::string::npos);
    auto md = Inspect("--markdown " + (dir_ / name));
    ASSERT_EQ(md.exit_code, 0) << md.output;
    EXPECT_NE(md.output.find("- generation: Needle 3 (generation 3"), std::string::npos);
    EXPECT_NE(md.output.find("### Accounting"), std::string::npos);
    auto t = Inspect("--tensors " + (dir_ / name));
    ASSERT_EQ(t.exit_code, 0) << t.output;
    for (const TensorEntry& e : f->tensors())
      EXPECT_NE(t.output.find(" " + e.name + " "), std::string::npos) << e.name;
  }
  auto heads = Inspect(dir_ / "heads.cact");
  // The CQ widths by canonical name (tests/quant/scheme_inference_test.cc), not a scheme.
  EXPECT_NE(heads.output.find("\nwidths      embedding=4,attn.q=3,attn.k=4,embedding_head=2,"
                              "default=2 (CQ widths by the longest matching prefix"),
            std::string::npos)
      << heads.output;
  EXPECT_EQ(heads.output.find("\nscheme "), std::string::npos) << heads.output;
  EXPECT_NE(heads.output.find("embedding_head (4 rows x 2 probes, 2 queries -> 16), router_head "
                              "(4 rows x 2 probes, 3 queries -> 3)"),
            std::string::npos)
      << heads.output;
  EXPECT_NE(Inspect(dir_ / "notaps.cact").output.find("QKV conv none"), std::string::npos);
}

TEST_F(InspectNeedle3, JsonHasTheGenerationHeaderAndEveryRecord) {
  auto f = Cact3File::Open(dir_ / "heads.cact");
  ASSERT_TRUE(f.ok()) << f.status();
  auto r = Inspect("--json " + (dir_ / "heads.cact") + " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const nlohmann::json j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["generation"], 3);
  EXPECT_EQ(j["header"]["tag"], "0x05E12A84");
  EXPECT_EQ(j["header"]["qk_head_dim"], 16);
  EXPECT_EQ(j["header"]["v_head_dim"], 8);
  EXPECT_EQ(j["header"]["out_vocab"], 48);
  EXPECT_EQ(j["header"]["engram_sites"].size(), 16u);
  EXPECT_EQ(j["layout"]["global_layers"], nlohmann::json::array({2}));
  EXPECT_EQ(j["probe_heads"].size(), 2u);
  EXPECT_EQ(j["probe_heads"][1]["name"], "router_head");
  EXPECT_EQ(j["probe_heads"][1]["queries"], 3);
  ASSERT_EQ(j["tensors"].size(), f->tensors().size());
  uint64_t params = 0;
  for (size_t i = 0; i < f->tensors().size(); ++i) {
    EXPECT_EQ(j["tensors"][i]["name"], f->tensors()[i].name);
    EXPECT_EQ(j["tensors"][i]["offset"], f->tensors()[i].record.offset);
    params += f->tensors()[i].record.NumElements();
  }
  EXPECT_EQ(j["accounting"]["params"], params);
  EXPECT_EQ(j["accounting"]["classes"]["FP32"]["tensors"], 2);  // hada_p1, hada_p2
  EXPECT_EQ(j["tokenizer"]["pieces"], 64);
  EXPECT_EQ(j["widths"], "embedding=4,attn.q=3,attn.k=4,embedding_head=2,default=2");
  EXPECT_FALSE(j.contains("scheme"));
  // Generation 2 says so too.
  auto g2 = Inspect("--json " + Fixture("tiny", "model.cact") + " 2>/dev/null");
  ASSERT_EQ(g2.exit_code, 0) << g2.output;
  EXPECT_EQ(nlohmann::json::parse(g2.output)["generation"], 2);
}

TEST_F(InspectNeedle3, VerifyChecksValuesAndTheChecksum) {
  const std::string path = dir_ / "heads.cact";
  auto r = Inspect("verify " + path);
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("OK " + path + ": valid .cact (generation 3), "), std::string::npos)
      << r.output;
  auto py = testing::Run(testing::Python() +
                         " -c \"import hashlib,sys; print(hashlib.sha256(open(sys.argv[1],'rb')"
                         ".read()).hexdigest())\" " +
                         path);
  ASSERT_EQ(py.exit_code, 0) << py.output;
  const std::string sha = py.output.substr(0, 64);
  EXPECT_NE(r.output.find("sha256 " + sha), std::string::npos) << r.output;
  EXPECT_EQ(Inspect("verify " + path + " --sha256 " + sha).exit_code, 0);
  auto wrong = Inspect("verify " + path + " --sha256 " + std::string(64, '0'));
  EXPECT_EQ(wrong.exit_code, 1) << wrong.output;
  auto j = Inspect("verify --json " + path + " 2>/dev/null | cat");
  ASSERT_EQ(j.exit_code, 0) << j.output;
  const nlohmann::json v = nlohmann::json::parse(j.output);
  EXPECT_EQ(v["generation"], 3);
  EXPECT_EQ(v["sha256"], sha);
  // A NaN in an FP16 record is found, located and fails the file.
  auto f = Cact3File::Open(path);
  ASSERT_TRUE(f.ok());
  const TensorEntry* t = f->Find("layer01.cond_u");
  std::vector<uint8_t> bytes = testing::ReadAll(path);
  StoreLE16(bytes.data() + t->record.offset + 6, 0x7E00);
  testing::WriteAll(dir_ / "nan.cact", bytes);
  auto nan = Inspect("verify " + (dir_ / "nan.cact"));
  EXPECT_EQ(nan.exit_code, 1) << nan.output;
  EXPECT_NE(nan.output.find(absl::StrFormat("tensor 'layer01.cond_u' (record %d) element 3 at "
                                            "byte %d is NaN",
                                            t->index, t->record.offset + 6)),
            std::string::npos)
      << nan.output;
}

TEST_F(InspectNeedle3, DiffComparesHeaderAndRecords) {
  const std::string a = dir_ / "plain.cact";
  EXPECT_EQ(Inspect("diff " + a + " " + a).exit_code, 0);
  // Another seed: every blob differs; another kv_window: one header field.
  testing::Synth3Options o;
  o.geometry = SmallGeometry3();
  o.group = 32;
  o.bits = MixedBits;
  o.seed = 2;
  o.geometry.kv_window = 32;
  Write("other.cact", o);
  auto r = Inspect("diff " + a + " " + (dir_ / "other.cact"));
  EXPECT_EQ(r.exit_code, 1) << r.output;
  EXPECT_NE(r.output.find("kv_window"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("layer00.q_proj"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("DIFFERENT: "), std::string::npos) << r.output;
  auto j = Inspect("diff --json " + a + " " + (dir_ / "other.cact") + " 2>/dev/null");
  EXPECT_EQ(j.exit_code, 1);
  const nlohmann::json d = nlohmann::json::parse(j.output);
  EXPECT_EQ(d["generation"], 3);
  ASSERT_EQ(d["header"].size(), 1u) << j.output;
  EXPECT_EQ(d["header"][0]["field"], "kv_window");
  // Two generations are not compared.
  auto mixed = Inspect("diff " + a + " " + Fixture("tiny", "model.cact"));
  EXPECT_EQ(mixed.exit_code, 2) << mixed.output;
  EXPECT_EQ(testing::CountLines(mixed.output), 1u) << mixed.output;
  EXPECT_NE(mixed.output.find("is generation 3 and"), std::string::npos) << mixed.output;
}

TEST_F(InspectNeedle3, DumpMatchesAnIndependentReader) {
  const std::string path = dir_ / "heads.cact";
  auto f = Cact3File::Open(path);
  ASSERT_TRUE(f.ok()) << f.status();
  int checked_cq = 0;
  for (const char* name :
       {"embedding", "layer00.q_proj", "layer01.k_proj", "layer02.v_proj", "mhc_phi_res",
        "engram1.tables", "router_head.proj", "embedding_head.probes", "layer02.q_taps",
        "layer00.w1b", "hada_p2", "router_head.calibration"}) {
    SCOPED_TRACE(name);
    const TensorEntry* t = f->Find(name);
    ASSERT_NE(t, nullptr);
    checked_cq += t->is_cq();
    const std::string npy = dir_ / (std::string(name) + ".npy");
    auto dump = Inspect("dump " + path + " --tensor " + name + " -o " + npy);
    ASSERT_EQ(dump.exit_code, 0) << dump.output;
    auto oracle = testing::Run(testing::Python() + " " + CACT_SOURCE_DIR +
                               "/tests/cli/cact3_values_oracle.py " + path + " " +
                               std::to_string(t->index) + " " + npy);
    EXPECT_EQ(oracle.exit_code, 0) << oracle.output;
  }
  EXPECT_EQ(checked_cq, 8);
  auto missing = Inspect("dump " + path + " --tensor layer00.d5 -o " + (dir_ / "x.npy"));
  EXPECT_EQ(missing.exit_code, 2) << missing.output;
  auto tokens = Inspect("tokens --json " + path);
  ASSERT_EQ(tokens.exit_code, 0) << tokens.output;
  EXPECT_EQ(nlohmann::json::parse(tokens.output)["pieces"].size(), 64u);
}

TEST_F(InspectNeedle3, BadHeadersExitTwoWithOneLine) {
  const std::vector<uint8_t> good = testing::ReadAll(dir_ / "heads.cact");
  // (header word, value, field named in the error)
  const std::vector<std::tuple<int, uint32_t, std::string>> cases = {
      {17, 1u << 5, "header.global_mask_lo at offset 68"},
      {33, 7, "header.engram_sites[1] at offset 132"},
      {31, 17, "header.num_engram_sites at offset 124"},
      {26, 5, "header.num_engram_orders at offset 104"},
      {7, 0, "header.d_model at offset 28"},
      {11, 0, "header.qk_head_dim at offset 44"},
      {12, 0, "header.v_head_dim at offset 48"},
      {2, 30, "header.codebook_len at offset 8"},
  };
  for (const auto& [word, value, field] : cases) {
    SCOPED_TRACE(field);
    std::vector<uint8_t> b = good;
    StoreLE32(b.data() + 4 * word, value);
    const std::string path = dir_ / "bad.cact";
    testing::WriteAll(path, b);
    auto r = Inspect(path);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_EQ(testing::CountLines(r.output), 1u) << r.output;
    EXPECT_EQ(r.output.rfind("cact-inspect: " + path + ": " + field + ": ", 0), 0u) << r.output;
  }
  // A record whose shape disagrees with the geometry (layer00.q_norm [16] as [8]).
  auto f = Cact3File::Open(dir_ / "heads.cact");
  ASSERT_TRUE(f.ok());
  const TensorEntry* t = f->Find("layer00.q_norm");
  std::vector<uint8_t> b = good;
  const uint64_t rec = 196 + 4 * 28 + 44 * uint64_t(t->index);
  StoreLE32(b.data() + rec + 4, 8);
  StoreLE64(b.data() + rec + 28, 16);
  testing::WriteAll(dir_ / "shape.cact", b);
  auto r = Inspect(dir_ / "shape.cact");
  EXPECT_EQ(r.exit_code, 2) << r.output;
  EXPECT_EQ(testing::CountLines(r.output), 1u) << r.output;
  EXPECT_NE(r.output.find(absl::StrFormat(
                "record %d (layer00.q_norm) shape at offset %d: [8] but the geometry makes "
                "layer00.q_norm [16]",
                t->index, rec + 4)),
            std::string::npos)
      << r.output;
}

// A .cact.zst of generation 3 is read (and refused by the other programs) the same way.
TEST_F(InspectNeedle3, CompressedFilesToo) {
  const std::vector<uint8_t> z = ZstdCompress(testing::ReadAll(dir_ / "heads.cact"), 3);
  ASSERT_FALSE(z.empty());
  const std::string path = dir_ / "heads.cact.zst";
  testing::WriteAll(path, z);
  auto r = Inspect(path);
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("decompressed from zstd"), std::string::npos) << r.output;
  EXPECT_NE(r.output.find("Needle 3 (generation 3"), std::string::npos) << r.output;
  EXPECT_EQ(Inspect("verify " + path).exit_code, 0);
  auto run = testing::Run(Tool("cact-run") + " " + path + " --tokens 2,5,7 -n 4");
  EXPECT_EQ(run.exit_code, 2) << run.output;
  EXPECT_NE(run.output.find(path + ": a Needle 3 file (generation 3, tag 0x05E12A84)"),
            std::string::npos)
      << run.output;
}

// cact-quant and cact-run open models through CactFile::Open: the one refusal line, exit 2.
// (cact-torch opens the same way; its CLI tests live in tests/torch and need libtorch.)
TEST_F(InspectNeedle3, EveryOtherProgramRefusesGenerationThree) {
  ASSERT_TOOL_BUILT("cact-quant");
  ASSERT_TOOL_BUILT("cact-run");
  const std::string m = dir_ / "heads.cact";
  const std::string text = Fixture("tiny", "case.json");
  const std::string line = m +
                           ": a Needle 3 file (generation 3, tag 0x05E12A84): this version runs, "
                           "rebuilds and converts generation 2 files; cact-inspect reads "
                           "generation 3\n";
  const std::vector<std::pair<std::string, std::string>> cmds = {
      {"cact-run", Tool("cact-run") + " " + m + " --tokens 2,5,7 -n 4"},
      {"cact-run", Tool("cact-run") + " " + m + " --tokens 2,5,7 --validate"},
      {"cact-run", Tool("cact-run") + " perplexity " + m + " -f " + text + " -q"},
      {"cact-run", Tool("cact-run") + " compare " + Fixture("tiny", "model.cact") + " " + m +
                       " -f " + text + " -q"},
      {"cact-quant",
       Tool("cact-quant") + " requant " + m + " --preset cq4 -q -o " + (dir_ / "out.cact")},
      {"cact-quant", Tool("cact-quant") + " dequant " + m + " -o " + (dir_ / "out.safetensors")},
  };
  for (const auto& [tool, cmd] : cmds) {
    auto r = testing::Run(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    EXPECT_EQ(r.output, tool + ": " + line) << cmd;
  }
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out.cact"));
  EXPECT_FALSE(std::filesystem::exists(dir_ / "out.safetensors"));
}

}  // namespace
}  // namespace cact
