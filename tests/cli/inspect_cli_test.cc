// cact-inspect from the command line, on the official fixtures.
#include <fstream>

#include "gtest/gtest.h"
#include "lib/npy.h"
#include "nlohmann/json.hpp"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::FixtureCases;
using testing::TempDir;
using testing::Tool;

nlohmann::json CaseJson(const std::string& kase) {
  std::ifstream f(Fixture(kase, "case.json"));
  return nlohmann::json::parse(f);
}

class InspectFixture : public ::testing::TestWithParam<std::string> {};

TEST_P(InspectFixture, JsonSummaryAgreesWithTheExporter) {
  const std::string kase = GetParam();
  auto r = testing::Run(Tool("cact-inspect") + " --json " + Fixture(kase, "model.cact") +
                        " 2>/dev/null");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  auto j = nlohmann::json::parse(r.output);
  auto c = CaseJson(kase);
  EXPECT_EQ(j["sha256"], c["model"]["sha256"]);
  EXPECT_EQ(j["bytes"], c["model"]["bytes"]);
  EXPECT_EQ(j["scheme"], c["bits_map"]);
  EXPECT_EQ(j["tensors"].size(), c["model"]["tensors"].get<size_t>());
  // Per-class accounting equals the exporter's own statistics.
  for (auto& [cls, stats] : c["model"]["dtype_stats"].items()) {
    ASSERT_TRUE(j["accounting"]["classes"].contains(cls)) << cls;
    EXPECT_EQ(j["accounting"]["classes"][cls]["tensors"], stats["tensors"]) << cls;
    EXPECT_EQ(j["accounting"]["classes"][cls]["params"], stats["params"]) << cls;
    EXPECT_EQ(j["accounting"]["classes"][cls]["bytes"], stats["bytes"]) << cls;
  }
  // Every CQ record's width is the one the exporter reports.
  for (auto& t : j["tensors"]) {
    if (t["dtype"] != "CQ") continue;
    std::string name = t["name"];
    EXPECT_EQ(t["bits"], c["record_bits"][name]) << name;
  }
}

TEST_P(InspectFixture, HumanAndMarkdownOutputs) {
  const std::string kase = GetParam();
  auto text = testing::Run(Tool("cact-inspect") + " " + Fixture(kase, "model.cact"));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  // The summary and the accounting; the tensor table is behind --tensors.
  EXPECT_EQ(text.output.find("layer00.q_proj"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("code-weighted width"), std::string::npos);
  for (const char* row : {"file ", "sha256 ", "generation ", "parameters ", "scheme ",
                          "geometry ", "kv cache ", "tokenizer "})
    EXPECT_NE(("\n" + text.output).find(std::string("\n") + row), std::string::npos) << row;
  auto tensors =
      testing::Run(Tool("cact-inspect") + " --tensors " + Fixture(kase, "model.cact"));
  ASSERT_EQ(tensors.exit_code, 0) << tensors.output;
  EXPECT_NE(tensors.output.find("layer00.q_proj"), std::string::npos);
  EXPECT_NE(tensors.output.find("codebooks\n  CQ2  ["), std::string::npos) << tensors.output;
  // Markdown carries the same summary.
  auto md = testing::Run(Tool("cact-inspect") + " --markdown " + Fixture(kase, "model.cact"));
  ASSERT_EQ(md.exit_code, 0);
  for (const char* row : {"- sha256: ", "- parameters: ", "- geometry: ", "- kv cache: "})
    EXPECT_NE(md.output.find(row), std::string::npos) << row << "\n" << md.output;
  auto md_tensors = testing::Run(Tool("cact-inspect") + " --markdown --tensors " +
                                 Fixture(kase, "model.cact"));
  EXPECT_NE(md_tensors.output.find("| embedding"), std::string::npos);
}

TEST_P(InspectFixture, VerifyChecksTheSha256) {
  const std::string kase = GetParam();
  std::string sha = CaseJson(kase)["model"]["sha256"];
  auto ok = testing::Run(Tool("cact-inspect") + " verify " + Fixture(kase, "model.cact") +
                         " --sha256 " + sha);
  EXPECT_EQ(ok.exit_code, 0) << ok.output;
  EXPECT_NE(ok.output.find("OK "), std::string::npos);
  std::string wrong = sha;
  wrong[0] = wrong[0] == '0' ? '1' : '0';
  auto bad = testing::Run(Tool("cact-inspect") + " verify " + Fixture(kase, "model.cact") +
                          " --sha256 " + wrong);
  EXPECT_EQ(bad.exit_code, 1);
  EXPECT_NE(bad.output.find("FAIL"), std::string::npos);
}

TEST_P(InspectFixture, DumpMatchesTheOfficialDequantization) {
  const std::string kase = GetParam();
  TempDir tmp;
  for (std::string name :
       {"embedding", "layer01.q_proj", "engram1.tables", "mhc_phi_res", "layer00.d1"}) {
    auto r = testing::Run(Tool("cact-inspect") + " dump " + Fixture(kase, "model.cact") +
                          " --tensor " + name + " -o " + tmp / "t.npy");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    auto ours = ReadNpy(tmp / "t.npy");
    auto theirs = ReadNpy(Fixture(kase, "official_dequant/" + name + ".npy"));
    ASSERT_TRUE(ours.ok() && theirs.ok());
    ASSERT_EQ(ours->shape, theirs->shape) << name;
    float maxabs = 0, maxdiff = 0;
    for (size_t i = 0; i < ours->size(); ++i) {
      maxabs = std::max(maxabs, std::fabs(theirs->data[i]));
      maxdiff = std::max(maxdiff, std::fabs(theirs->data[i] - ours->data[i]));
    }
    // float32 rounding of a different summation order (FWHT vs dense matmul).
    EXPECT_LE(maxdiff, 1e-6f * maxabs) << name;
  }
}

TEST_P(InspectFixture, DiffSeesExactlyTheTouchedTensor) {
  const std::string kase = GetParam();
  TempDir tmp;
  auto same = testing::Run(Tool("cact-inspect") + " diff " + Fixture(kase, "model.cact") + " " +
                           Fixture(kase, "model.cact"));
  EXPECT_EQ(same.exit_code, 0) << same.output;
  EXPECT_NE(same.output.find("IDENTICAL: 0 of"), std::string::npos) << same.output;

  // Flip one code byte inside layer01.k_proj.
  auto info = nlohmann::json::parse(
      testing::Run(Tool("cact-inspect") + " --json " + Fixture(kase, "model.cact") + " 2>/dev/null")
          .output);
  uint64_t off = 0;
  for (auto& t : info["tensors"])
    if (t["name"] == "layer01.k_proj") off = t["offset"];
  ASSERT_GT(off, 0u);
  auto bytes = testing::ReadAll(Fixture(kase, "model.cact"));
  bytes[off + 3] ^= 0x5A;
  testing::WriteAll(tmp / "edited.cact", bytes);
  auto r = testing::Run(Tool("cact-inspect") + " diff --json " + Fixture(kase, "model.cact") + " " +
                        tmp / "edited.cact");
  EXPECT_EQ(r.exit_code, 1);
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["changed_tensors"], 1);
  for (auto& t : j["tensors"]) {
    if (t["name"] == "layer01.k_proj") {
      EXPECT_EQ(t["status"], "changed");
      EXPECT_LT(t["code_agreement"].get<double>(), 1.0);
      EXPECT_GT(t["code_agreement"].get<double>(), 0.99);
      EXPECT_GT(t["max_abs_diff"].get<double>(), 0.0);
    } else {
      EXPECT_EQ(t["status"], "identical") << t["name"];
    }
  }
}

TEST_P(InspectFixture, TokensListsEveryPiece) {
  const std::string kase = GetParam();
  auto r = testing::Run(Tool("cact-inspect") + " tokens --json " + Fixture(kase, "model.cact"));
  ASSERT_EQ(r.exit_code, 0);
  auto j = nlohmann::json::parse(r.output);
  EXPECT_EQ(j["pieces"].size(), CaseJson(kase)["config"]["vocab_size"].get<size_t>());
  EXPECT_EQ(j["pieces"][4]["piece"], "<|im_start|>");
  EXPECT_EQ(j["pieces"][4]["type"], "user");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, InspectFixture, ::testing::ValuesIn(FixtureCases()));

TEST(InspectErrors, CorruptFilesGiveOneLineAndExitTwo) {
  TempDir tmp;
  auto bytes = testing::ReadAll(Fixture("tiny", "model.cact"));
  // Truncated inside the directory.
  testing::WriteAll(tmp / "trunc.cact", std::vector<uint8_t>(bytes.begin(), bytes.begin() + 500));
  auto r = testing::Run(Tool("cact-inspect") + " " + tmp / "trunc.cact");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
  EXPECT_NE(r.output.find("trunc.cact"), std::string::npos);
  EXPECT_NE(r.output.find("offset"), std::string::npos);
  // Bad tag.
  auto bad = bytes;
  bad[0] ^= 1;
  testing::WriteAll(tmp / "tag.cact", bad);
  r = testing::Run(Tool("cact-inspect") + " " + tmp / "tag.cact");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.output.find("tag"), std::string::npos) << r.output;
  // Missing file, unknown tensor.
  EXPECT_EQ(testing::Run(Tool("cact-inspect") + " " + tmp / "missing.cact").exit_code, 2);
  EXPECT_EQ(testing::Run(Tool("cact-inspect") + " dump " + Fixture("tiny", "model.cact") +
                         " --tensor nope -o " + tmp / "x.npy")
                .exit_code,
            2);
  // verify reports invalid files with exit 1 and a verdict.
  r = testing::Run(Tool("cact-inspect") + " verify " + tmp / "trunc.cact");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.output.find("FAIL"), std::string::npos);
}

TEST(InspectZstd, CompressedInputIsFirstClass) {
  TempDir tmp;
  std::string zst = tmp / "model.cact.zst";
  ASSERT_EQ(testing::Run("zstd -q -19 " + Fixture("odd", "model.cact") + " -o " + zst).exit_code,
            0);
  auto a = testing::Run(Tool("cact-inspect") + " --json " + Fixture("odd", "model.cact") +
                        " 2>/dev/null");
  auto b = testing::Run(Tool("cact-inspect") + " --json " + zst + " 2>/dev/null");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  auto ja = nlohmann::json::parse(a.output), jb = nlohmann::json::parse(b.output);
  EXPECT_EQ(ja["sha256"], jb["sha256"]);  // SHA of the decompressed .cact
  EXPECT_TRUE(jb["zstd"].get<bool>());
  EXPECT_EQ(testing::Run(Tool("cact-inspect") + " diff " + Fixture("odd", "model.cact") + " " + zst)
                .exit_code,
            0);
}

}  // namespace
}  // namespace cact
