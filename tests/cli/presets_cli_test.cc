// cact-quant presets, and --preset on build and requant: the listed needle2 size is the size
// of a real needle2 file, a preset builds the bytes of its scheme, misuse is a clear error,
// and --help lists every preset.
#include <filesystem>

#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "quant/scheme_presets.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::ReadAll;
using testing::TempDir;

using testing::QuantTool;

nlohmann::json PresetsJson() {
  auto r = testing::Run(QuantTool() + " presets --json 2>/dev/null");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return nlohmann::json::parse(r.output);
}

TEST(PresetsCli, NeedleSizeIsTheSizeOfTheSyntheticNeedle2File) {
  TempDir dir;
  auto synth =
      testing::Run(QuantTool() + " synth --geometry needle2 --seed 1 -q -o " + dir / "n2.cact");
  ASSERT_EQ(synth.exit_code, 0) << synth.output;
  uint64_t listed = 0;
  for (const auto& p : PresetsJson())
    if (p["name"] == "needle") listed = p["needle2_file_bytes"].get<uint64_t>();
  EXPECT_EQ(listed, ReadAll(dir / "n2.cact").size());
}

TEST(PresetsCli, TableListsEveryPreset) {
  auto r = testing::Run(QuantTool() + " presets");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(PresetsJson().size(), SchemePresets().size());
  for (const SchemePreset& p : SchemePresets()) {
    EXPECT_NE(r.output.find(std::string(p.name) + " "), std::string::npos) << p.name;
    EXPECT_NE(r.output.find(p.scheme), std::string::npos) << p.name;
  }
}

TEST(PresetsCli, BuildPresetEqualsItsScheme) {
  TempDir dir;
  const std::string in = " -q --weights " + Fixture("odd", "weights.safetensors") +
                         " --tokenizer " + Fixture("odd", "tokenizer.model");
  auto a = testing::Run(QuantTool() + " build" + in + " --preset cq4 -o " + dir / "a.cact");
  auto b = testing::Run(QuantTool() + " build" + in + " --scheme default=4 -o " + dir / "b.cact");
  ASSERT_EQ(a.exit_code, 0) << a.output;
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(ReadAll(dir / "a.cact"), ReadAll(dir / "b.cact"));
  // requant --preset too: cq4 -> cq2 equals --scheme default=2.
  auto c =
      testing::Run(QuantTool() + " requant -q " + dir / "a.cact --preset cq2 -o " + dir / "c.cact");
  auto d = testing::Run(QuantTool() + " requant -q " + dir / "a.cact --scheme default=2 -o " +
                        dir / "d.cact");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  ASSERT_EQ(d.exit_code, 0) << d.output;
  EXPECT_EQ(ReadAll(dir / "c.cact"), ReadAll(dir / "d.cact"));
}

TEST(PresetsCli, MisuseIsAClearError) {
  TempDir dir;
  const std::string in = " --weights " + Fixture("odd", "weights.safetensors") + " --tokenizer " +
                         Fixture("odd", "tokenizer.model") + " -o " + dir / "x.cact";
  auto unknown = testing::Run(QuantTool() + " build" + in + " --preset q4_k_m");
  EXPECT_NE(unknown.exit_code, 0);
  EXPECT_NE(unknown.output.find("unknown preset \"q4_k_m\""), std::string::npos) << unknown.output;
  EXPECT_NE(unknown.output.find("cq4, "), std::string::npos) << unknown.output;
  auto both = testing::Run(QuantTool() + " build" + in + " --preset cq4 --scheme default=4");
  EXPECT_NE(both.exit_code, 0);
  EXPECT_NE(both.output.find("excludes"), std::string::npos) << both.output;
  auto neither = testing::Run(QuantTool() + " requant " + Fixture("tiny", "model.cact") + " -o " +
                              dir / "y.cact");
  EXPECT_NE(neither.exit_code, 0);
  EXPECT_NE(neither.output.find("--scheme S or --preset NAME"), std::string::npos)
      << neither.output;
  auto unknown_requant = testing::Run(QuantTool() + " requant " + Fixture("tiny", "model.cact") +
                                      " --preset nope -o " + dir / "y.cact");
  EXPECT_NE(unknown_requant.exit_code, 0);
  EXPECT_NE(unknown_requant.output.find("unknown preset"), std::string::npos);
  EXPECT_FALSE(std::filesystem::exists(dir / "x.cact"));
  EXPECT_FALSE(std::filesystem::exists(dir / "y.cact"));
}

TEST(PresetsCli, HelpListsEveryPresetWithSizeAndQuality) {
  for (const char* command : {"build", "requant"}) {
    auto r = testing::Run(QuantTool() + " " + command + " --help");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_NE(r.output.find("--preset"), std::string::npos) << command;
    for (const SchemePreset& p : SchemePresets()) {
      const size_t at = r.output.find("\n  " + std::string(p.name) + " ");
      ASSERT_NE(at, std::string::npos) << command << " " << p.name << "\n" << r.output;
      const std::string line = r.output.substr(at + 1, r.output.find('\n', at + 1) - at - 1);
      EXPECT_NE(line.find(" MB "), std::string::npos) << line;
      EXPECT_NE(line.find(std::string("quality: ") + p.quality), std::string::npos) << line;
    }
  }
}

}  // namespace
}  // namespace cact
