// Official checkpoints and LoRA adapters (pickles numpy writes in the official layouts) read
// into canonical weights: the exporter's mapping gives the fixtures' float weights back bit
// for bit in every protocol and under numpy 2's global names, the LoRA merge equals numpy's
// float16 / float32 arithmetic bit for bit, and hostile or inconsistent pickles are refused
// with the global or path and the byte offset named.
#include <cstring>
#include <filesystem>
#include <map>
#include <tuple>

#include "formats/needle/named_geometries.h"
#include "gtest/gtest.h"
#include "lib/float16.h"
#include "quant/import/flax_checkpoint.h"
#include "quant/weights_geometry.h"
#include "support/test_support.h"
#include "support/training_pickles.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::TrainingPickles;

std::map<std::string, const FloatTensor*> ByName(const Safetensors& s) {
  std::map<std::string, const FloatTensor*> m;
  for (const FloatTensor& t : s.tensors) m[t.name] = &t;
  return m;
}

// Every tensor of `want` is in `got` with its shape and values, `round` applied to `want`.
void ExpectTensorsEqual(const Safetensors& want, const Safetensors& got, float (*round)(float)) {
  const auto have = ByName(got);
  for (const FloatTensor& w : want.tensors) {
    auto it = have.find(w.name);
    ASSERT_NE(it, have.end()) << w.name;
    const FloatTensor& g = *it->second;
    ASSERT_EQ(g.shape, w.shape) << w.name;
    ASSERT_EQ(g.data.size(), w.data.size()) << w.name;
    size_t differ = 0;
    for (size_t k = 0; k < w.data.size(); ++k) {
      const float expect = round(w.data[k]);
      differ += std::memcmp(&expect, &g.data[k], 4) != 0;
    }
    EXPECT_EQ(differ, 0u) << w.name << ": values differ from the fixture";
  }
}

float Same(float f) { return f; }
float AsHalf(float f) { return HalfBitsToFloat(FloatToHalfBits(f)); }

class CheckpointFile : public ::testing::TestWithParam<std::tuple<std::string, std::string>> {};

TEST_P(CheckpointFile, MapsBackToTheFixtureWeightsBitForBit) {
  const auto& [kase, file] = GetParam();
  absl::StatusOr<CheckpointBuild> b =
      LoadCheckpointForBuild(TrainingPickles::File(kase, file), "", std::nullopt);
  ASSERT_TRUE(b.ok()) << b.status();
  absl::StatusOr<Safetensors> fixture = ReadSafetensors(Fixture(kase, "weights.safetensors"));
  ASSERT_TRUE(fixture.ok()) << fixture.status();
  const bool half = file.find("f16") != std::string::npos;
  ExpectTensorsEqual(*fixture, b->canonical.weights, half ? AsHalf : Same);
  EXPECT_EQ(b->canonical.weights.tensors.size(), fixture->tensors.size());
  EXPECT_TRUE(b->canonical.unused.empty());
  EXPECT_EQ(b->canonical.dtype, half ? "float16" : "float32");
  // The header window the exporter budgets, and the scheme the config names.
  EXPECT_EQ(std::to_string(b->geometry.kv_window), fixture->metadata.at("kv_window_header"));
  EXPECT_EQ(b->scheme.ToString(), ParseScheme(fixture->metadata.at("bits_map"))->ToString());
  EXPECT_EQ(b->scheme_source, "checkpoint config weight_bits");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CheckpointFile,
                         ::testing::Combine(::testing::Values("tiny", "odd"),
                                            ::testing::Values("ckpt_f32_p2.pkl", "ckpt_f32_p4.pkl",
                                                              "ckpt_f32_p5.pkl", "ckpt_f32_np2.pkl",
                                                              "ckpt_f32_np2_p5.pkl",
                                                              "ckpt_f16_p4.pkl")),
                         [](const auto& info) {
                           std::string n = std::get<0>(info.param) + "_" + std::get<1>(info.param);
                           return n.substr(0, n.size() - 4);
                         });

class CheckpointCase : public ::testing::TestWithParam<std::string> {};

TEST_P(CheckpointCase, LoraMergeEqualsNumpyInTheCheckpointsDtype) {
  const std::string kase = GetParam();
  for (const auto& [ckpt, adapter, merged] :
       {std::tuple{"ckpt_f16_p4.pkl", "adapter_p4.pkl", "merged_f16.safetensors"},
        std::tuple{"ckpt_f32_p4.pkl", "adapter_p2.pkl", "merged_f32.safetensors"},
        std::tuple{"ckpt_f32_p5.pkl", "adapter_p5.pkl", "merged_f32.safetensors"}}) {
    SCOPED_TRACE(std::string(ckpt) + " + " + adapter);
    absl::StatusOr<CheckpointBuild> b = LoadCheckpointForBuild(
        TrainingPickles::File(kase, ckpt), TrainingPickles::File(kase, adapter), std::nullopt);
    ASSERT_TRUE(b.ok()) << b.status();
    absl::StatusOr<Safetensors> want = ReadSafetensors(TrainingPickles::File(kase, merged));
    ASSERT_TRUE(want.ok()) << want.status();
    ASSERT_FALSE(want->tensors.empty());
    ExpectTensorsEqual(*want, b->canonical.weights, Same);
    ASSERT_FALSE(b->notes.empty());
    EXPECT_NE(b->notes.back().find("scale 4"), std::string::npos) << b->notes.back();
  }
}

TEST_P(CheckpointCase, HostilePicklesAreRefusedAndNothingRuns) {
  const std::string kase = GetParam();
  const std::map<std::string, std::string> globals = {{"evil_os_system.pkl", "posix.system"},
                                                      {"evil_eval.pkl", "builtins.eval"},
                                                      {"evil_popen.pkl", "subprocess.Popen"},
                                                      {"evil_exec.pkl", "builtins.exec"}};
  for (const auto& [file, global] : globals) {
    SCOPED_TRACE(file);
    absl::StatusOr<CheckpointBuild> b =
        LoadCheckpointForBuild(TrainingPickles::File(kase, file), "", std::nullopt);
    ASSERT_FALSE(b.ok());
    const std::string msg(b.status().message());
    EXPECT_NE(msg.find(global), std::string::npos) << msg;
    EXPECT_NE(msg.find("at offset"), std::string::npos) << msg;
    EXPECT_NE(msg.find(file), std::string::npos) << msg;
  }
  EXPECT_FALSE(std::filesystem::exists(TrainingPickles::Marker()));
}

TEST_P(CheckpointCase, ArtifactsGivenInTheWrongPlaceAreNamed) {
  const std::string kase = GetParam();
  const std::string other = kase == "tiny" ? "odd" : "tiny";
  auto as_ckpt = LoadCheckpointForBuild(TrainingPickles::File(kase, "adapter_p4.pkl"), "", {});
  ASSERT_FALSE(as_ckpt.ok());
  EXPECT_NE(as_ckpt.status().message().find("is a LoRA adapter"), std::string::npos);
  auto as_adapter = LoadCheckpointForBuild(TrainingPickles::File(kase, "ckpt_f32_p4.pkl"),
                                           TrainingPickles::File(kase, "ckpt_f16_p4.pkl"), {});
  ASSERT_FALSE(as_adapter.ok());
  EXPECT_NE(as_adapter.status().message().find("is a checkpoint"), std::string::npos);
  // An adapter trained on the other fixture: its first kernel's shape names the problem.
  auto foreign = LoadCheckpointForBuild(TrainingPickles::File(kase, "ckpt_f32_p4.pkl"),
                                        TrainingPickles::File(other, "adapter_p4.pkl"), {});
  ASSERT_FALSE(foreign.ok());
  const std::string msg(foreign.status().message());
  EXPECT_NE(msg.find("another model"), std::string::npos) << msg;
  EXPECT_NE(msg.find("lora/stack/layers/block/self_attn/"), std::string::npos) << msg;
  EXPECT_NE(msg.find("at offset"), std::string::npos) << msg;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CheckpointCase, ::testing::Values("tiny", "odd"));

// Checkpoints whose params disagree with their config, written by numpy from a good one.
TEST(Checkpoint, ParamsThatDisagreeWithTheConfigAreNamedWithTheirOffset) {
  testing::TempDir dir;
  const std::string good = TrainingPickles::File("tiny", "ckpt_f32_p4.pkl");
  const std::string script =
      "import pickle, sys, numpy as np\n"
      "src, out = sys.argv[1], sys.argv[2]\n"
      "def load():\n"
      "    with open(src, 'rb') as f: return pickle.load(f)\n"  // our own test file
      "def save(c, name):\n"
      "    with open(out + '/' + name, 'wb') as f: pickle.dump(c, f, protocol=4)\n"
      "c = load(); c['config']['d_model'] = 96; save(c, 'd96.pkl')\n"
      "c = load(); del c['params']['stack']['final_norm']; save(c, 'no_final.pkl')\n"
      "c = load(); s = c['params']['stack']['final_norm']; s['scale'] = "
      "s['scale'].astype(np.float64); save(c, 'f64.pkl')\n"
      "c = load(); c['config'] = [1, 2]; save(c, 'cfg_list.pkl')\n";
  const auto r =
      testing::Run(testing::Python() + " -c \"" + script + "\" " + good + " " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::map<std::string, std::vector<std::string>> expect = {
      {"d96.pkl", {"params/embedding/embedding at offset", "shape [512, 128]", "[512, 96]"}},
      {"no_final.pkl", {"params/stack/final_norm/scale is missing", "[128]"}},
      {"f64.pkl", {"params/stack/final_norm/scale at offset", "float64"}},
      {"cfg_list.pkl", {"config at offset", "is a list"}}};
  for (const auto& [file, parts] : expect) {
    absl::StatusOr<CheckpointBuild> b = LoadCheckpointForBuild(dir / file, "", std::nullopt);
    ASSERT_FALSE(b.ok()) << file;
    for (const std::string& p : parts)
      EXPECT_NE(b.status().message().find(p), std::string::npos) << file << ": " << b.status();
  }
}

TEST(Checkpoint, ExporterWindowIsTheBudgetedOneClampedByTheConfig) {
  Geometry g = Needle2Geometry();  // 27 layers, 4 KV heads of 64, 2 engram sites
  g.max_seq_len = 2048;
  // 27 * (2*256 + 2*8*4) + 2 * (512 + 16*4) = 16704 bytes a position -> 721 -> 704.
  EXPECT_EQ(ExporterKvWindow(g, 0), 704u);
  EXPECT_EQ(ExporterKvWindow(g, 256), 256u);
  EXPECT_EQ(ExporterKvWindow(g, 4096), 704u);
  g.max_seq_len = 100;  // the floor wins over max_seq_len
  EXPECT_EQ(ExporterKvWindow(g, 0), 160u);
}

}  // namespace
}  // namespace cact
