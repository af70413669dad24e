// The synthetic model generator: deterministic, canonical names and shapes, realistic
// value ranges (the ones measured on the official fixtures), a real tokenizer.
#include "quant/synthetic.h"

#include <cmath>

#include "formats/tokenizer_blob.h"
#include "gtest/gtest.h"
#include "support/needle_tokenizer.h"

namespace cact {
namespace {

double Std(const std::vector<float>& v, double* mean_out = nullptr) {
  double m = 0, s = 0;
  for (float x : v) m += x;
  m /= double(v.size());
  for (float x : v) s += (x - m) * (x - m);
  if (mean_out) *mean_out = m;
  return std::sqrt(s / double(v.size()));
}

TEST(Synthetic, Needle2LayoutMatchesTheReleasedFile) {
  auto p = FindSyntheticPreset("needle2");
  ASSERT_TRUE(p.ok());
  Safetensors w = GenerateSyntheticWeights(*p, 1);
  // 405 records in the released file, minus the tokenizer.
  ASSERT_EQ(w.tensors.size(), 404u);
  auto layout = CanonicalLayout(p->geometry, p->heads);
  ASSERT_EQ(layout.size(), 405u);
  for (size_t i = 0; i < w.tensors.size(); ++i) {
    EXPECT_EQ(w.tensors[i].name, layout[i].name);
    EXPECT_EQ(w.tensors[i].shape, layout[i].shape) << layout[i].name;
  }
  uint64_t params = 0;
  for (const auto& t : w.tensors) params += t.data.size();
  EXPECT_EQ(params, 43634423u);  // spec: total parameters of the released file
  EXPECT_EQ(w.metadata.at("bits_map"), "embedding=4,mhc=4,default=2");
}

TEST(Synthetic, DeterministicPerSeed) {
  auto p = FindSyntheticPreset("small");
  ASSERT_TRUE(p.ok());
  Safetensors a = GenerateSyntheticWeights(*p, 7), b = GenerateSyntheticWeights(*p, 7),
              c = GenerateSyntheticWeights(*p, 8);
  ASSERT_EQ(a.tensors.size(), b.tensors.size());
  bool any_diff = false;
  for (size_t i = 0; i < a.tensors.size(); ++i) {
    EXPECT_EQ(a.tensors[i].data, b.tensors[i].data) << a.tensors[i].name;
    any_diff |= a.tensors[i].data != c.tensors[i].data;
  }
  EXPECT_TRUE(any_diff);
}

// Value ranges follow the fixtures' weights.safetensors (measured with numpy): components
// are away from their init values, so every one of them matters numerically.
TEST(Synthetic, ValueRangesLikeTheOfficialFixtures) {
  auto p = FindSyntheticPreset("needle2");
  ASSERT_TRUE(p.ok());
  Safetensors w = GenerateSyntheticWeights(*p, 3);
  auto stat = [&](const std::string& name, double* mean) { return Std(w.Find(name)->data, mean); };
  double mean;
  EXPECT_NEAR(stat("embedding", &mean), 0.1, 0.005);
  EXPECT_NEAR(stat("layer05.q_proj", &mean), 0.05, 0.003);
  EXPECT_NEAR(stat("engram1.tables", &mean), 1.0, 0.02);
  EXPECT_NEAR(stat("mhc_phi_res", &mean), 0.08, 0.004);
  stat("layer10.d1", &mean);
  EXPECT_NEAR(mean, 1.0, 0.1);
  stat("layer10.d3", &mean);
  EXPECT_NEAR(mean, 0.3, 0.05);
  EXPECT_GT(stat("layer00.norm_in", &mean), 0.1);  // norm offsets are not left at zero
  // mhc_b_res is diagonal-heavy like the trained routing.
  const auto& b = w.Find("mhc_b_res")->data;
  EXPECT_GT(b[0], 2.0f);
  EXPECT_LT(std::fabs(b[1]), 2.5f);
  // Probe heads: contrastive has zero bias, confidence does not.
  for (float x : w.Find("contrastive_head.bias")->data) EXPECT_EQ(x, 0.0f);
  EXPECT_EQ(w.Find("heads.manifest")->data, (std::vector<float>{1.0f, 2.0f}));
}

TEST(Synthetic, TokenizersHaveTheNeedleSpecialIds) {
  for (const char* name : {"needle2", "small"}) {
    auto p = FindSyntheticPreset(name);
    ASSERT_TRUE(p.ok());
    auto tok = SyntheticTokenizer(*p);
    ASSERT_TRUE(tok.ok()) << tok.status();
    SCOPED_TRACE(name);
    testing::ExpectNeedleTokenizerShape(*tok, p->geometry.vocab);
  }
}

TEST(Synthetic, UnknownPresetIsAClearError) {
  auto p = FindSyntheticPreset("needle3");
  ASSERT_FALSE(p.ok());
  EXPECT_NE(p.status().message().find("needle2"), std::string::npos);
}

}  // namespace
}  // namespace cact
