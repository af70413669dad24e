// Named scheme presets: each parses and fits the released layout, and the planned size is
// the size a real build writes (checked on the small synthetic model for every preset; the
// needle2 check against a built file is in tests/cli/presets_cli_test.cc).
#include "quant/scheme_presets.h"

#include <gtest/gtest.h>

#include "quant/build.h"
#include "quant/cq/codebook.h"
#include "quant/synthetic.h"
#include "support/needle2_accounting.h"

namespace cact {
namespace {

std::vector<std::string> MatrixNames(const SyntheticPreset& p) {
  std::vector<std::string> names;
  for (const TensorSpec& t : CanonicalLayout(p.geometry, p.heads))
    if (t.kind == TensorKind::kMatrix) names.push_back(t.name);
  return names;
}

TEST(SchemePresets, EveryPresetParsesAndMatchesNeedle2) {
  absl::StatusOr<SyntheticPreset> n2 = FindSyntheticPreset("needle2");
  ASSERT_TRUE(n2.ok()) << n2.status();
  const std::vector<std::string> matrices = MatrixNames(*n2);
  ASSERT_GE(SchemePresets().size(), 6u);
  for (const SchemePreset& p : SchemePresets()) {
    absl::StatusOr<Scheme> s = SchemeFromPreset(p.name);
    ASSERT_TRUE(s.ok()) << p.name << ": " << s.status();
    EXPECT_TRUE(CheckRulesMatch(*s, matrices).ok()) << p.name;
    // The default width is used too: no preset is a rule list that covers everything.
    size_t at_default = 0;
    for (const std::string& m : matrices) at_default += s->BitsFor(m) == s->default_bits;
    EXPECT_GT(at_default, 0u) << p.name;
    EXPECT_FALSE(std::string(p.description).empty()) << p.name;
    EXPECT_FALSE(std::string(p.quality).empty()) << p.name;
    EXPECT_GT(p.exact_calls, 0.0) << p.name;
    EXPECT_LE(p.exact_calls, 1.0) << p.name;
  }
}

TEST(SchemePresets, NamedSchemesAreTheDocumentedOnes) {
  EXPECT_EQ(SchemeFromPreset("needle")->ToString(), kDefaultScheme);
  EXPECT_EQ(SchemeFromPreset("cq4")->ToString(), "default=4");
  EXPECT_EQ(SchemeFromPreset("ternary")->BitsFor("embedding"), 5u);  // record bits 5
  EXPECT_EQ(SchemeFromPreset("cq2")->BitsFor("embedding"), 2u);
  EXPECT_EQ(SchemeFromPreset("attn4")->BitsFor("layer07.out_proj"), 4u);
  EXPECT_EQ(SchemeFromPreset("attn4")->BitsFor("engram1.tables"), 2u);
}

TEST(SchemePresets, UnknownNameListsTheKnownOnes) {
  absl::StatusOr<Scheme> s = SchemeFromPreset("q4_k_m");
  ASSERT_FALSE(s.ok());
  for (const SchemePreset& p : SchemePresets())
    EXPECT_NE(s.status().message().find(p.name), std::string::npos) << s.status();
}

TEST(SchemePresets, Needle2PlanHasTheReleasedAccounting) {
  absl::StatusOr<PlannedSize> size = Needle2Size(*SchemeFromPreset("needle"));
  ASSERT_TRUE(size.ok()) << size.status();
  testing::ExpectReleasedNeedle2Classes(size->accounting);
  // Presets are listed from the largest file to the smallest (ternary codes take 2-bit
  // crumbs: its size is cq2's).
  uint64_t last = UINT64_MAX;
  for (const SchemePreset& p : SchemePresets()) {
    const uint64_t bytes = Needle2Size(*SchemeFromPreset(p.name))->file_bytes;
    EXPECT_LE(bytes, last) << p.name;
    last = bytes;
  }
}

TEST(SchemePresets, PlannedSizeIsTheBuiltSizeForEveryPreset) {
  absl::StatusOr<SyntheticPreset> small = FindSyntheticPreset("small");
  ASSERT_TRUE(small.ok()) << small.status();
  const Safetensors weights = GenerateSyntheticWeights(*small, 1);
  absl::StatusOr<TokenizerBlob> tok = SyntheticTokenizer(*small);
  ASSERT_TRUE(tok.ok()) << tok.status();
  for (const SchemePreset& p : SchemePresets()) {
    BuildRequest req;
    req.weights = &weights;
    req.tokenizer = *tok;
    req.scheme = *SchemeFromPreset(p.name);
    RebuildReport report;
    absl::StatusOr<CactContents> c = BuildCact(req, &report);
    ASSERT_TRUE(c.ok()) << p.name << ": " << c.status();
    absl::StatusOr<std::vector<uint8_t>> bytes = SerializeCact(*c);
    ASSERT_TRUE(bytes.ok()) << bytes.status();
    const PlannedSize plan = PlanSize(*req.scheme, small->geometry, small->heads, small->group,
                                      SerializeTokenizerBlob(*tok).size());
    EXPECT_EQ(plan.file_bytes, bytes->size()) << p.name;
  }
}

}  // namespace
}  // namespace cact
