// train/peft_adapter: what it writes is read back by quant/lora (every value, the scale) and
// merged by `cact-quant lora`; a failed write leaves no file behind.
#include "train/peft_adapter.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "formats/cact/cact_file.h"
#include "formats/safetensors.h"
#include "quant/import/lora.h"
#include "quant/synthetic.h"
#include "quant/tensor_values.h"
#include "support/test_support.h"

namespace cact::train {
namespace {

namespace fs = std::filesystem;

std::string Slurp(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

Geometry SmallGeometry() { return FindSyntheticPreset("small")->geometry; }

PeftLoraPair Pair(uint32_t layer, const std::string& proj, uint32_t rank, const Geometry& g,
                  float base) {
  PeftLoraPair p;
  p.layer = layer;
  p.proj = proj;
  p.in = proj == "out_proj" ? g.attn_dim() : g.d_model;
  p.out = proj == "k_proj" || proj == "v_proj" ? g.kv_dim()
          : proj == "out_proj"                 ? g.d_model
                                               : g.attn_dim();
  for (uint32_t i = 0; i < rank * p.in; ++i) p.a.push_back(base + 0.001f * float(i % 97));
  for (uint32_t i = 0; i < p.out * rank; ++i) p.b.push_back(-base + 0.002f * float(i % 89));
  return p;
}

PeftAdapter Adapter(const Geometry& g) {
  PeftAdapter ad;
  ad.rank = 4;
  ad.alpha = 8;
  ad.base_model = "base.cact";
  ad.pairs = {Pair(0, "q_proj", 4, g, 0.01f), Pair(0, "v_proj", 4, g, 0.02f),
              Pair(3, "out_proj", 4, g, 0.03f)};
  return ad;
}

// No file of the pair and no temporary is left in `dir`.
void ExpectNoFiles(const std::string& dir) {
  if (!fs::exists(dir)) return;
  for (const auto& e : fs::directory_iterator(dir))
    if (e.is_regular_file()) ADD_FAILURE() << "left behind: " << e.path();
}

TEST(PeftAdapter, QuantLoraReadsEveryValueAndTheScale) {
  testing::TempDir tmp;
  const Geometry g = SmallGeometry();
  const PeftAdapter ad = Adapter(g);
  const std::string dir = tmp / "out/adapter";  // created with its parent
  ASSERT_TRUE(WritePeftAdapter(dir, ad).ok());
  const std::string config = Slurp(dir + "/adapter_config.json");
  const auto c = nlohmann::json::parse(config);
  EXPECT_EQ(c["peft_type"], "LORA");
  EXPECT_EQ(c["task_type"], "CAUSAL_LM");
  EXPECT_EQ(c["r"], 4);
  EXPECT_EQ(c["lora_alpha"], 8.0);
  EXPECT_EQ(c["lora_dropout"], 0.0);
  EXPECT_EQ(c["bias"], "none");
  EXPECT_EQ(c["fan_in_fan_out"], false);
  EXPECT_EQ(c["use_rslora"], false);
  EXPECT_EQ(c["base_model_name_or_path"], "base.cact");
  EXPECT_EQ(c["target_modules"], nlohmann::json({"q_proj", "v_proj", "out_proj"}));

  auto st = ReadSafetensors(dir + "/adapter_model.safetensors");
  ASSERT_TRUE(st.ok()) << st.status();
  EXPECT_EQ(st->metadata.at("format"), "pt");
  ASSERT_NE(st->Find("base_model.model.model.layers.3.self_attn.out_proj.lora_B.weight"), nullptr);
  auto parsed = ParseLoraAdapter(*st, "adapter", config, std::nullopt, g);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(parsed->layout, "peft");
  EXPECT_EQ(parsed->scale, 2.0);  // lora_alpha / r
  ASSERT_EQ(parsed->pairs.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    SCOPED_TRACE(i);
    const LoraPair& got = parsed->pairs[i];
    const PeftLoraPair& want = ad.pairs[i];
    EXPECT_EQ(got.layer, want.layer);
    EXPECT_EQ(got.proj, want.proj);
    EXPECT_EQ(got.rank, 4u);
    EXPECT_EQ(got.in, want.in);
    EXPECT_EQ(got.out, want.out);
    EXPECT_EQ(got.a, want.a);
    EXPECT_EQ(got.b, want.b);
  }
}

TEST(PeftAdapter, CactQuantLoraMergesIt) {
  testing::TempDir tmp;
  const std::string quant = testing::Tool("cact-quant");
  auto made = testing::Run(quant + " synth --geometry small --seed 1 -q -o " + (tmp / "base.cact"));
  ASSERT_EQ(made.exit_code, 0) << made.output;
  ASSERT_TRUE(WritePeftAdapter(tmp / "ad", Adapter(SmallGeometry())).ok());
  auto merged = testing::Run(quant + " lora " + (tmp / "base.cact") + " --adapter " +
                             (tmp / "ad/adapter_model.safetensors") + " --adapter-config " +
                             (tmp / "ad/adapter_config.json") + " -q -o " + (tmp / "merged.cact"));
  ASSERT_EQ(merged.exit_code, 0) << merged.output;
  auto base = CactFile::Open(tmp / "base.cact");
  auto out = CactFile::Open(tmp / "merged.cact");
  ASSERT_TRUE(base.ok() && out.ok());
  auto values = [](const CactFile& f, const std::string& name) {
    const TensorEntry* t = f.Find(name);
    EXPECT_NE(t, nullptr) << name;
    return t ? *TensorValues(f, *t) : std::vector<float>();
  };
  for (const char* changed : {"layer00.q_proj", "layer00.v_proj", "layer03.out_proj"})
    EXPECT_NE(values(*base, changed), values(*out, changed)) << changed;
  for (const char* same : {"layer00.k_proj", "layer01.q_proj", "layer03.q_proj"})
    EXPECT_EQ(values(*base, same), values(*out, same)) << same;
}

TEST(PeftAdapter, AnInvalidAdapterWritesNothing) {
  testing::TempDir tmp;
  const Geometry g = SmallGeometry();
  struct Case {
    std::string what;
    std::function<void(PeftAdapter*)> spoil;
  };
  const std::vector<Case> cases = {
      {"rank must be at least 1", [](PeftAdapter* a) { a->rank = 0; }},
      {"not one of", [](PeftAdapter* a) { a->pairs[1].proj = "up_proj"; }},
      {"given twice", [](PeftAdapter* a) { a->pairs[1] = a->pairs[0]; }},
      {"A has", [](PeftAdapter* a) { a->pairs[2].a.pop_back(); }},
      {"non-finite", [](PeftAdapter* a) { a->pairs[2].b[5] = NAN; }},
  };
  for (const Case& c : cases) {
    PeftAdapter ad = Adapter(g);
    c.spoil(&ad);
    const absl::Status s = WritePeftAdapter(tmp / "bad", ad);
    ASSERT_FALSE(s.ok()) << c.what;
    EXPECT_NE(std::string(s.message()).find(c.what), std::string::npos) << s;
    EXPECT_FALSE(fs::exists(tmp / "bad")) << c.what;
  }
}

TEST(PeftAdapter, AFailedWriteLeavesNoPartialFiles) {
  testing::TempDir tmp;
  const PeftAdapter ad = Adapter(SmallGeometry());
  // The directory is a file: nothing can be created.
  testing::WriteAll(tmp / "file", {1, 2, 3});
  EXPECT_FALSE(WritePeftAdapter(tmp / "file", ad).ok());
  EXPECT_FALSE(WritePeftAdapter(tmp / "file/sub", ad).ok());
  // The config cannot be renamed into place (a directory holds its name): the weights
  // written just before are removed again, and no temporary is left.
  fs::create_directories(tmp / "dir/adapter_config.json");
  EXPECT_FALSE(WritePeftAdapter(tmp / "dir", ad).ok());
  ExpectNoFiles(tmp / "dir");
  // The weights cannot be renamed into place: nothing at all is written.
  fs::create_directories(tmp / "dir2/adapter_model.safetensors");
  EXPECT_FALSE(WritePeftAdapter(tmp / "dir2", ad).ok());
  ExpectNoFiles(tmp / "dir2");
}

}  // namespace
}  // namespace cact::train
