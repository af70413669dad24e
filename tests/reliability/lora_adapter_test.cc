// LoRA adapters come from the internet too: a hostile adapter must give a clean error.
//
// REGRESSION (bug found by the reliability work, quant/import/lora.cc): ParseLoraAdapter matches
// keys with std::regex, whose libstdc++ executor recurses once per character of `(\d+)` and
// of `(?:\.[A-Za-z0-9_]+)?`; a key with ~40,000 digits in the layer index (or a long adapter
// name) overflows the 8 MB stack and kills the process with SIGSEGV. Such a key fits easily
// in a safetensors header (limit 100 MB). These tests fail until the key length is bounded
// before matching (or the quantifiers are bounded, e.g. \d{1,6}, [A-Za-z0-9_]{1,64}).
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <optional>

#include "formats/cact/cact_file.h"
#include "formats/needle/named_geometries.h"
#include "formats/safetensors.h"
#include "quant/import/lora.h"
#include "reliability/allocation_probe.h"
#include "support/test_support.h"

namespace cact {
namespace {

using reliability::ChildResult;
using reliability::RunInChildWithAddressSpaceLimit;
using testing::Fixture;
using testing::TempDir;

constexpr uint64_t kHeadroom = 1ull << 30;

Safetensors AdapterWithKey(const std::string& key) {
  Safetensors st;
  st.tensors.push_back({key, {2, 128}, std::vector<float>(256, 0.01f), "F32"});
  return st;
}

// Runs ParseLoraAdapter in a child (a crash must not take the test binary down); the child
// exits 0 when the adapter was rejected with an error naming the file, 1 when accepted,
// 3 when rejected without naming it.
ChildResult ParseInChild(const Safetensors& st) {
  return RunInChildWithAddressSpaceLimit(
      [&] {
        auto ad = ParseLoraAdapter(st, "evil.safetensors", "", 1.0, Needle2Geometry());
        if (ad.ok()) return 1;
        return ad.status().message().find("evil.safetensors") != std::string::npos ? 0 : 3;
      },
      kHeadroom);
}

TEST(RegressionLoraRegexStackOverflow, HugeLayerIndexIsACleanError) {
  const std::string key = "base_model.model.model.layers." + std::string(200000, '1') +
                          ".self_attn.q_proj.lora_A.weight";
  ChildResult r = ParseInChild(AdapterWithKey(key));
  EXPECT_TRUE(r.exited && r.exit_code == 0)
      << r.describe() << " (quant/import/lora.cc: std::regex recursion on a 200,000-digit layer index)";
}

TEST(RegressionLoraRegexStackOverflow, HugeAdapterNameIsACleanError) {
  const std::string key =
      "layers.1.self_attn.q_proj.lora_A." + std::string(200000, 'a') + ".weight";
  ChildResult r = ParseInChild(AdapterWithKey(key));
  EXPECT_TRUE(r.exited && r.exit_code == 0)
      << r.describe()
      << " (quant/import/lora.cc: std::regex recursion on a 200,000-character adapter name)";
}

// Long keys that match neither layout are already rejected cleanly: the regexes only recurse
// deeply once a prefix matched. Guards the fix from over-reaching.
TEST(LoraAdapterLimits, HugeUnrelatedKeyIsACleanError) {
  ChildResult r = ParseInChild(AdapterWithKey(std::string(200000, 'x')));
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

// Lying shapes and ranks are rejected with the key named, and nothing is sized from them.
TEST(LoraAdapterLimits, LyingShapesAreCleanErrors) {
  const Geometry g = Needle2Geometry();
  struct Case {
    std::vector<FloatTensor> tensors;
    std::string expect;
  };
  auto t = [](std::string name, std::vector<uint32_t> shape) {
    uint64_t n = 1;
    for (uint32_t d : shape) n *= d;
    return FloatTensor{std::move(name), std::move(shape), std::vector<float>(n, 0.5f), "F32"};
  };
  const std::string k = "layers.0.self_attn.q_proj.lora_";
  const std::vector<Case> cases = {
      {{t(k + "A.weight", {2, 512}), t(k + "B.weight", {512, 3})}, "lora_B.weight"},
      {{t(k + "A.weight", {2, 511}), t(k + "B.weight", {512, 2})}, "lora_A.weight"},
      {{t(k + "A.weight", {0, 512}), t(k + "B.weight", {512, 0})}, "rank 0"},
      {{t("layers.27.self_attn.q_proj.lora_A.weight", {2, 512}),
        t("layers.27.self_attn.q_proj.lora_B.weight", {512, 2})},
       "layer 27"},
      {{t(k + "A.weight", {2, 512})}, "no matching"},
      {{t("q_proj.A", {27, 512, 2}), t("q_proj.B", {27, 2, 511})}, "q_proj.B"},
      {{t("q_proj.A", {26, 512, 2}), t("q_proj.B", {26, 2, 512})}, "q_proj.A"},
  };
  for (const Case& c : cases) {
    Safetensors st;
    st.tensors = c.tensors;
    auto ad = ParseLoraAdapter(st, "lying.safetensors", "", 1.0, g);
    ASSERT_FALSE(ad.ok()) << c.expect;
    EXPECT_NE(ad.status().message().find(c.expect), std::string::npos) << ad.status();
    EXPECT_NE(ad.status().message().find("lying.safetensors"), std::string::npos) << ad.status();
  }
}

// Through the CLI: the same hostile adapter must make `cact-quant lora` exit 2 with one line.
TEST(RegressionLoraRegexStackOverflow, CliExitsTwoWithOneLine) {
  ASSERT_TOOL_BUILT("cact-quant");
  TempDir dir;
  const std::string key = "layers." + std::string(200000, '1') + ".self_attn.q_proj.lora_A.weight";
  ASSERT_TRUE(WriteSafetensors(dir / "evil.safetensors", AdapterWithKey(key)).ok());
  auto r = testing::Run(testing::Tool("cact-quant") + " lora " + Fixture("tiny", "model.cact") +
                        " --adapter " + (dir / "evil.safetensors") + " --scale 1 -o " +
                        (dir / "out.cact"));
  EXPECT_EQ(r.signal, 0) << "killed by signal " << r.signal;
  EXPECT_EQ(r.exit_code, 2) << r.output.substr(0, 300);
  EXPECT_LE(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output.substr(0, 300);
  EXPECT_FALSE(std::filesystem::exists(dir / "out.cact"));
}

}  // namespace
}  // namespace cact
