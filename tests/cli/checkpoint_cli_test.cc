// The official fine-tuning artifacts from the command line: `build --checkpoint` reproduces
// the exporter's file byte for byte (every protocol, numpy 2 names, tokenizer from a model
// or a base), `--lora` merges as `needle build` does, `lora --adapter X.pkl` equals the same
// adapter given as safetensors, `convert` gives the canonical weights back, `cact-inspect`
// describes both kinds, and hostile pickles fail with one line, exit 2 and no output.
#include <cmath>
#include <filesystem>
#include <set>

#include "formats/safetensors.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "support/test_support.h"
#include "support/training_pickles.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::ReadAll;
using testing::TempDir;
using testing::Tool;
using testing::TrainingPickles;

using testing::QuantTool;
std::string Inspect() { return Tool("cact-inspect"); }

class CheckpointCli : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    ASSERT_TOOL_BUILT("cact-quant");
    ASSERT_TOOL_BUILT("cact-inspect");
  }
  std::string Pkl(const std::string& name) const { return TrainingPickles::File(GetParam(), name); }
};

TEST_P(CheckpointCli, BuildFromTheCheckpointIsTheExportersFileInEveryProtocol) {
  const std::string kase = GetParam();
  const std::vector<uint8_t> want = ReadAll(Fixture(kase, "model.cact"));
  TempDir dir;
  for (const char* f : {"ckpt_f32_p2.pkl", "ckpt_f32_p4.pkl", "ckpt_f32_p5.pkl", "ckpt_f32_np2.pkl",
                        "ckpt_f32_np2_p5.pkl"}) {
    SCOPED_TRACE(f);
    auto r = testing::Run(QuantTool() + " build -q --checkpoint " + Pkl(f) + " --tokenizer " +
                          Fixture(kase, "tokenizer.model") + " -o " + dir / "out.cact");
    ASSERT_EQ(r.exit_code, 0) << r.output;
    EXPECT_EQ(ReadAll(dir / "out.cact"), want);
    EXPECT_NE(r.output.find("checkpoint config weight_bits"), std::string::npos) << r.output;
  }
  // `needle build` takes the tokenizer from the published archive: --base does the same.
  auto b = testing::Run(QuantTool() + " build --json --checkpoint " + Pkl("ckpt_f32_p4.pkl") +
                        " --base " + Fixture(kase, "model.cact") + " -o " + dir / "b.cact");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(ReadAll(dir / "b.cact"), want);
  const auto j = nlohmann::json::parse(b.output);
  EXPECT_EQ(j["scheme_source"], "checkpoint config weight_bits");
  EXPECT_NE(j["tokenizer_source"].get<std::string>().find("its tokenizer"), std::string::npos);
}

TEST_P(CheckpointCli, ConvertGivesTheCanonicalWeightsAndBuildAgreesWithThem) {
  const std::string kase = GetParam();
  TempDir dir;
  auto c = testing::Run(QuantTool() + " convert " + Pkl("ckpt_f32_p5.pkl") + " -o " +
                        dir / "w.safetensors");
  ASSERT_EQ(c.exit_code, 0) << c.output;
  absl::StatusOr<Safetensors> got = ReadSafetensors(dir / "w.safetensors");
  absl::StatusOr<Safetensors> want = ReadSafetensors(Fixture(kase, "weights.safetensors"));
  ASSERT_TRUE(got.ok() && want.ok());
  ASSERT_EQ(got->tensors.size(), want->tensors.size());
  for (const FloatTensor& w : want->tensors) {
    const FloatTensor* g = got->Find(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_EQ(g->shape, w.shape) << w.name;
    EXPECT_EQ(g->data, w.data) << w.name;
  }
  EXPECT_EQ(got->metadata["kv_window_header"], want->metadata["kv_window_header"]);
  auto b =
      testing::Run(QuantTool() + " build -q --weights " + dir / "w.safetensors" + " --tokenizer " +
                   Fixture(kase, "tokenizer.model") + " -o " + dir / "w.cact");
  ASSERT_EQ(b.exit_code, 0) << b.output;
  EXPECT_EQ(ReadAll(dir / "w.cact"), ReadAll(Fixture(kase, "model.cact")));

  // A float16 checkpoint converts to F16 by default (exact), with --lora merged first: the
  // merged projections are numpy's, and building the converted file equals building directly.
  auto c16 = testing::Run(QuantTool() + " convert --json " + Pkl("ckpt_f16_p4.pkl") + " --lora " +
                          Pkl("adapter_p4.pkl") + " -o " + dir / "m.safetensors");
  ASSERT_EQ(c16.exit_code, 0) << c16.output;
  const auto j = nlohmann::json::parse(c16.output);
  EXPECT_EQ(j["dtype"], "F16");
  EXPECT_EQ(j["exact"], true);
  absl::StatusOr<Safetensors> merged = ReadSafetensors(dir / "m.safetensors");
  absl::StatusOr<Safetensors> numpy = ReadSafetensors(Pkl("merged_f16.safetensors"));
  ASSERT_TRUE(merged.ok() && numpy.ok());
  for (const FloatTensor& w : numpy->tensors) {
    const FloatTensor* g = merged->Find(w.name);
    ASSERT_NE(g, nullptr) << w.name;
    EXPECT_EQ(g->data, w.data) << w.name;
  }
  auto direct = testing::Run(QuantTool() + " build -q --checkpoint " + Pkl("ckpt_f16_p4.pkl") +
                             " --lora " + Pkl("adapter_p4.pkl") + " --tokenizer " +
                             Fixture(kase, "tokenizer.model") + " -o " + dir / "direct.cact");
  ASSERT_EQ(direct.exit_code, 0) << direct.output;
  EXPECT_NE(direct.output.find("merged "), std::string::npos) << direct.output;
  auto via =
      testing::Run(QuantTool() + " build -q --weights " + dir / "m.safetensors" + " --tokenizer " +
                   Fixture(kase, "tokenizer.model") + " -o " + dir / "via.cact");
  ASSERT_EQ(via.exit_code, 0) << via.output;
  EXPECT_EQ(ReadAll(dir / "direct.cact"), ReadAll(dir / "via.cact"));
  EXPECT_NE(ReadAll(dir / "direct.cact"), ReadAll(Fixture(kase, "model.cact")));
}

TEST_P(CheckpointCli, LoraFromThePickleEqualsTheSameAdapterAsSafetensors) {
  const std::string kase = GetParam();
  TempDir dir;
  auto p = testing::Run(QuantTool() + " lora -q " + Fixture(kase, "model.cact") + " --adapter " +
                        Pkl("adapter_p5.pkl") + " -o " + dir / "p.cact");
  ASSERT_EQ(p.exit_code, 0) << p.output;
  auto s = testing::Run(QuantTool() + " lora -q " + Fixture(kase, "model.cact") + " --adapter " +
                        Pkl("adapter_stacked.safetensors") + " -o " + dir / "s.cact");
  ASSERT_EQ(s.exit_code, 0) << s.output;
  EXPECT_EQ(ReadAll(dir / "p.cact"), ReadAll(dir / "s.cact"));
  EXPECT_NE(ReadAll(dir / "p.cact"), ReadAll(Fixture(kase, "model.cact")));
}

TEST_P(CheckpointCli, InspectDescribesCheckpointsAndAdapters) {
  const std::string kase = GetParam();
  auto c = testing::Run(Inspect() + " --json " + Pkl("ckpt_f16_p4.pkl"));
  ASSERT_EQ(c.exit_code, 0) << c.output;
  const auto j = nlohmann::json::parse(c.output);
  EXPECT_EQ(j["kind"], "checkpoint");
  EXPECT_EQ(j["protocol"], 4);
  EXPECT_EQ(j["format_version"], 2);
  EXPECT_EQ(j["step"], 1234);
  EXPECT_EQ(j["config"]["weight_bits"], j["cact_build"]["bits_map"]);
  EXPECT_EQ(j["cact_build"]["ok"], true);
  uint64_t params = 0;
  for (const auto& a : j["arrays"]) {
    EXPECT_EQ(a["dtype"], "float16");
    uint64_t n = 1;
    for (uint64_t d : a["shape"]) n *= d;
    EXPECT_EQ(a["bytes"].get<uint64_t>(), 2 * n);
    params += n;
  }
  absl::StatusOr<Safetensors> w = ReadSafetensors(Fixture(kase, "weights.safetensors"));
  ASSERT_TRUE(w.ok());
  uint64_t fixture_params = 0;
  for (const FloatTensor& t : w->tensors)
    if (t.name != "heads.manifest") fixture_params += t.data.size();
  // The manifest is derived, and a bias the checkpoint leaves out is stored as zeros.
  uint64_t zero_bias = 0;
  if (const FloatTensor* b = w->Find("contrastive_head.bias")) zero_bias = b->data.size();
  EXPECT_EQ(params + zero_bias, fixture_params);

  auto text = testing::Run(Inspect() + " " + Pkl("ckpt_f32_p2.pkl"));
  ASSERT_EQ(text.exit_code, 0) << text.output;
  EXPECT_NE(text.output.find("pickle protocol 2"), std::string::npos) << text.output;
  EXPECT_NE(text.output.find("params/stack/layers/block/self_attn/q_proj/kernel"),
            std::string::npos);
  EXPECT_NE(text.output.find("builds: "), std::string::npos) << text.output;

  auto a = testing::Run(Inspect() + " --json " + Pkl("adapter_p2.pkl"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto ja = nlohmann::json::parse(a.output);
  EXPECT_EQ(ja["kind"], "lora_adapter");
  EXPECT_EQ(ja["rank"], 4);
  EXPECT_EQ(ja["scale"], 4.0);
  EXPECT_EQ(ja["targets"].size(), 5u);
  EXPECT_EQ(ja["arrays"].size(), 10u);
  EXPECT_EQ(ja["seed"], 0);
  EXPECT_EQ(ja["qat_bits"], nullptr);
  EXPECT_FALSE(ja["extra"].contains("seed"));
}

TEST_P(CheckpointCli, HostilePicklesFailWithOneLineAndLeaveNothing) {
  TempDir dir;
  for (const char* f : {"evil_os_system.pkl", "evil_eval.pkl", "evil_popen.pkl", "evil_exec.pkl"}) {
    SCOPED_TRACE(f);
    for (const std::string& cmd :
         {QuantTool() + " build --checkpoint " + Pkl(f) + " --tokenizer " +
              Fixture(GetParam(), "tokenizer.model") + " -o " + dir / "out.cact",
          QuantTool() + " convert " + Pkl(f) + " -o " + dir / "out.safetensors",
          Inspect() + " " + Pkl(f)}) {
      auto r = testing::Run(cmd);
      EXPECT_EQ(r.exit_code, 2) << r.output;
      EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
      EXPECT_NE(r.output.find("is not allowed"), std::string::npos) << r.output;
    }
  }
  EXPECT_TRUE(std::filesystem::is_empty(dir.path()));
  EXPECT_FALSE(std::filesystem::exists(TrainingPickles::Marker()));
}

// Adapters of the quantization-aware finetune: `build --lora` deploys the numerics they
// trained through, as `needle build` does (their bits map, else their width, over the
// checkpoint's weight_bits), says so, and refuses an explicit scheme that contradicts them.
TEST_P(CheckpointCli, QatAdaptersDeployTheirNumerics) {
  const std::string kase = GetParam();
  TempDir dir;
  const std::string common = " --checkpoint " + Pkl("ckpt_f32_p4.pkl") + " --tokenizer " +
                             Fixture(kase, "tokenizer.model");
  auto build = [&](const std::string& adapter, const std::string& flags, const std::string& out) {
    return testing::Run(QuantTool() + " build --json" + common + " --lora " + Pkl(adapter) + flags +
                        " -o " + dir / out);
  };
  // What each must equal: the plain adapter (same arrays, no metadata) built at that scheme.
  struct Case {
    std::string adapter, same_as_flags, source;
  };
  const std::vector<Case> cases = {
      {"adapter_qat_map.pkl", " --scheme embedding=3,default=4",
       "the adapter's QAT metadata (qat_bits_map)"},
      {"adapter_qat_w2.pkl", " --scheme default=2", "the adapter's QAT metadata (qat_bits 2)"},
      {"adapter_qat_none.pkl", "", "checkpoint config weight_bits"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.adapter);
    auto got = build(c.adapter, "", "got.cact");
    ASSERT_EQ(got.exit_code, 0) << got.output;
    EXPECT_EQ(nlohmann::json::parse(got.output)["scheme_source"], c.source);
    auto want = build("adapter_p4.pkl", c.same_as_flags, "want.cact");
    ASSERT_EQ(want.exit_code, 0) << want.output;
    EXPECT_EQ(ReadAll(dir / "got.cact"), ReadAll(dir / "want.cact"));
  }
  EXPECT_NE(ReadAll(dir / "got.cact"), std::vector<uint8_t>());

  // Explicit schemes against the metadata: the map refuses any, the width any other width.
  struct Refusal {
    std::string adapter, flags, message;
  };
  const std::vector<Refusal> refusals = {
      {"adapter_qat_map.pkl", " --scheme embedding=3,default=4",
       ": the adapter was trained for the checkpoint's mixed CQ bit map embedding=3,default=4, "
       "but --scheme would deploy different numerics (leave it out: the build follows the "
       "adapter)"},
      {"adapter_qat_map.pkl", " --preset cq4", "but --preset cq4 would deploy different numerics"},
      {"adapter_qat_w2.pkl", " --scheme default=4",
       ": the adapter was trained for CQ W2, but --scheme (default=4) would deploy different "
       "numerics; rebuild at the adapter bit width"},
  };
  for (const Refusal& r : refusals) {
    SCOPED_TRACE(r.adapter + r.flags);
    auto out = testing::Run(QuantTool() + " build -q" + common + " --lora " + Pkl(r.adapter) +
                            r.flags + " -o " + dir / "refused.cact");
    EXPECT_EQ(out.exit_code, 2) << out.output;
    EXPECT_NE(out.output.find(r.message), std::string::npos) << out.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "refused.cact"));
  }
  auto same_width = build("adapter_qat_w2.pkl", " --scheme default=2", "w2.cact");
  EXPECT_EQ(same_width.exit_code, 0) << same_width.output;

  // Metadata of another type than finetune writes: one line naming the key.
  for (const auto& [adapter, message] : std::vector<std::pair<std::string, std::string>>{
           {"adapter_qat_bad_bits.pkl", "qat_bits"}, {"adapter_qat_bad_map.pkl", "qat_bits_map"}}) {
    auto out = build(adapter, "", "bad.cact");
    EXPECT_EQ(out.exit_code, 2) << out.output;
    EXPECT_NE(out.output.find(message), std::string::npos) << out.output;
  }

  // cact-inspect shows the metadata.
  auto a = testing::Run(Inspect() + " --json " + Pkl("adapter_qat_map.pkl"));
  ASSERT_EQ(a.exit_code, 0) << a.output;
  const auto ja = nlohmann::json::parse(a.output);
  EXPECT_EQ(ja["qat_bits_map"], "embedding=3,default=4");
  EXPECT_EQ(ja["qat_bits"], nullptr);
  EXPECT_EQ(ja["seed"], 7);
  auto t = testing::Run(Inspect() + " " + Pkl("adapter_qat_w2.pkl"));
  EXPECT_NE(t.output.find("trained through CQ W2 (needle build deploys it)"), std::string::npos)
      << t.output;
}

// `lora` into a .cact follows the same metadata: the adapter's widths are deployed (a matrix
// whose width changes is quantized afresh from W + dW, as `needle build` would after its
// merge), and a scheme given against the metadata is refused.
TEST_P(CheckpointCli, LoraIntoACactFollowsTheAdaptersQatMetadata) {
  const std::string kase = GetParam();
  TempDir dir;
  const std::string base = Fixture(kase, "model.cact");
  auto lora = [&](const std::string& adapter, const std::string& flags, const std::string& out) {
    return testing::Run(QuantTool() + " lora --json " + base + " --adapter " + Pkl(adapter) +
                        flags + " -o " + dir / out);
  };
  struct Case {
    std::string adapter, same_as_flags, scheme, source;
  };
  const std::vector<Case> cases = {
      {"adapter_qat_map.pkl", " --scheme embedding=3,default=4", "embedding=3,default=4",
       "the adapter's QAT metadata (qat_bits_map)"},
      {"adapter_qat_w2.pkl", " --scheme default=2", "default=2",
       "the adapter's QAT metadata (qat_bits 2)"},
      {"adapter_qat_none.pkl", "", "", "base file widths"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.adapter);
    auto got = lora(c.adapter, "", "got.cact");
    ASSERT_EQ(got.exit_code, 0) << got.output;
    const auto j = nlohmann::json::parse(got.output);
    EXPECT_EQ(j["scheme_source"], c.source);
    if (!c.scheme.empty()) {
      EXPECT_EQ(j["scheme"], c.scheme);
    }
    auto want = lora("adapter_p4.pkl", c.same_as_flags, "want.cact");
    ASSERT_EQ(want.exit_code, 0) << want.output;
    EXPECT_EQ(ReadAll(dir / "got.cact"), ReadAll(dir / "want.cact"));
  }
  // At 2 bits every CQ matrix changed width: the file is not the base's widths.
  auto w2 = lora("adapter_qat_w2.pkl", "", "w2.cact");
  ASSERT_EQ(w2.exit_code, 0) << w2.output;
  auto keep = lora("adapter_qat_none.pkl", "", "keep.cact");
  ASSERT_EQ(keep.exit_code, 0) << keep.output;
  EXPECT_NE(ReadAll(dir / "w2.cact"), ReadAll(dir / "keep.cact"));
  size_t requantized = 0;
  const auto jw2 = nlohmann::json::parse(w2.output);
  for (const auto& t : jw2["tensors"])
    if (t["action"] == "requantized") {
      ++requantized;
      EXPECT_NE(t["target"].get<std::string>().find("CQ2"), std::string::npos) << t.dump();
    }
  EXPECT_GT(requantized, 0u);

  const std::vector<std::pair<std::string, std::string>> refusals = {
      {"adapter_qat_map.pkl --scheme default=4",
       "but --scheme would deploy different numerics (leave it out"},
      {"adapter_qat_map.pkl --preset cq4", "but --preset cq4 would deploy different numerics"},
      {"adapter_qat_w2.pkl --scheme default=4",
       ": the adapter was trained for CQ W2, but --scheme (default=4) would deploy different "
       "numerics"},
  };
  for (const auto& [args, message] : refusals) {
    SCOPED_TRACE(args);
    auto out = testing::Run(QuantTool() + " lora -q " + base + " --adapter " +
                            Pkl(args.substr(0, args.find(' '))) + args.substr(args.find(' ')) +
                            " -o " + dir / "refused.cact");
    EXPECT_EQ(out.exit_code, 2) << out.output;
    EXPECT_NE(out.output.find(message), std::string::npos) << out.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "refused.cact"));
  }
  // Without metadata a scheme is the user's to choose.
  auto chosen = lora("adapter_p4.pkl", " --scheme default=2", "chosen.cact");
  ASSERT_EQ(chosen.exit_code, 0) << chosen.output;
  EXPECT_EQ(nlohmann::json::parse(chosen.output)["scheme_source"], "--scheme");
}

INSTANTIATE_TEST_SUITE_P(Fixtures, CheckpointCli, ::testing::ValuesIn(testing::FixtureCases()));

// A checkpoint holding a NaN: convert and build refuse it naming the tensor, nothing written.
TEST(CheckpointCliNonFinite, ANaNInTheCheckpointIsRefused) {
  TempDir dir;
  absl::StatusOr<Safetensors> w = ReadSafetensors(Fixture("tiny", "weights.safetensors"));
  ASSERT_TRUE(w.ok()) << w.status();
  FloatTensor* q = nullptr;
  for (FloatTensor& t : w->tensors)
    if (t.name == "layer00.q_proj") q = &t;
  ASSERT_NE(q, nullptr);
  q->data[5] = std::nanf("");
  ASSERT_TRUE(WriteSafetensors(dir / "nan.safetensors", *w).ok());
  auto made = testing::Run(testing::Python() + " " + CACT_SOURCE_DIR +
                           "/tests/quant/write_flax_pickles.py - " + dir.path() + " --weights " +
                           dir / "nan.safetensors" + " --only ckpt_f32_p4.pkl");
  ASSERT_EQ(made.exit_code, 0) << made.output;
  for (const std::string& cmd :
       {QuantTool() + " convert " + dir / "ckpt_f32_p4.pkl" + " -o " + dir / "out.safetensors",
        QuantTool() + " build --checkpoint " + dir / "ckpt_f32_p4.pkl" + " --base " +
            Fixture("tiny", "model.cact") + " -q -o " + dir / "out.safetensors"}) {
    auto r = testing::Run(cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    EXPECT_NE(r.output.find("tensor 'layer00.q_proj' has a non-finite value (nan) at flat index 5"),
              std::string::npos)
        << r.output;
    EXPECT_FALSE(std::filesystem::exists(dir / "out.safetensors"));
  }
}

}  // namespace
}  // namespace cact
