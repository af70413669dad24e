// Scheme parsing and longest-prefix matching; the fixtures' per-record widths (case.json,
// from the official exporter) are the oracle for matching.
#include "quant/scheme.h"

#include <gtest/gtest.h>

#include <fstream>

#include <nlohmann/json.hpp>

#include "formats/cact/header.h"
#include "formats/needle/named_geometries.h"
#include "formats/needle/tensor_table.h"
#include "support/test_support.h"

namespace cact {
namespace {

TEST(Scheme, DefaultSchemeRoundTripsAndMatches) {
  absl::StatusOr<Scheme> s = ParseScheme(kDefaultScheme);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->ToString(), kDefaultScheme);
  EXPECT_EQ(s->default_bits, 2u);
  EXPECT_EQ(s->BitsFor("embedding"), 4u);
  EXPECT_EQ(s->BitsFor("layer00.q_proj"), 2u);
  EXPECT_EQ(s->BitsFor("layer26.out_proj"), 2u);
  EXPECT_EQ(s->BitsFor("mhc_phi_pre"), 4u);
  EXPECT_EQ(s->BitsFor("mhc_phi_res"), 4u);
  EXPECT_EQ(s->BitsFor("engram1.tables"), 2u);
}

TEST(Scheme, FixtureRecordWidthsFollowTheirScheme) {
  for (const std::string& kase : testing::FixtureCases()) {
    std::ifstream f(testing::Fixture(kase, "case.json"));
    nlohmann::json j = nlohmann::json::parse(f);
    absl::StatusOr<Scheme> s = ParseScheme(j["bits_map"].get<std::string>());
    ASSERT_TRUE(s.ok()) << s.status();
    size_t n = 0;
    for (auto& [name, bits] : j["record_bits"].items()) {
      EXPECT_EQ(s->BitsFor(name), bits.get<uint32_t>()) << kase << " " << name;
      ++n;
    }
    EXPECT_GT(n, 20u) << kase;
  }
}

TEST(Scheme, LongestPrefixWinsAndEngramSitesMatch) {
  absl::StatusOr<Scheme> s =
      ParseScheme(" attn=3 , attn.q_proj=4,engram=4,engram1=1.58,mhc_phi_res=2,mhc=3,default=2,");
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->BitsFor("layer05.q_proj"), 4u);
  EXPECT_EQ(s->BitsFor("layer05.k_proj"), 3u);
  EXPECT_EQ(s->BitsFor("engram1.tables"), 5u);
  EXPECT_EQ(s->BitsFor("engram1.value_proj"), 5u);
  EXPECT_EQ(s->BitsFor("engram0.key_proj"), 4u);
  EXPECT_EQ(s->BitsFor("mhc_phi_res"), 2u);
  EXPECT_EQ(s->BitsFor("mhc_phi_pre"), 3u);
  EXPECT_EQ(s->BitsFor("embedding"), 2u);
  EXPECT_EQ(s->ToString(),
            "attn=3,attn.q_proj=4,engram=4,engram1=1.58,mhc_phi_res=2,mhc=3,default=2");
  EXPECT_EQ(WidthName(5), "1.58");
  EXPECT_EQ(WidthName(3), "3");
}

TEST(Scheme, EveryCanonicalNameGetsAWidth) {
  absl::StatusOr<Scheme> s = ParseScheme("embedding=4,mhc=4,default=2");
  ASSERT_TRUE(s.ok());
  size_t cq2 = 0, cq4 = 0;
  for (const TensorSpec& t : CanonicalLayout(Needle2Geometry(), {}))
    if (t.kind == TensorKind::kMatrix) (s->BitsFor(t.name) == 4 ? cq4 : cq2)++;
  EXPECT_EQ(cq2, 141u);  // spec: released file class counts
  EXPECT_EQ(cq4, 4u);
}

struct BadScheme {
  const char* text;
  const char* expect;  // substring of the error
};

TEST(Scheme, ErrorsNameTheEntryAndPosition) {
  const BadScheme cases[] = {
      {"embedding=4", "needs a default=BITS"},
      {"", "needs a default=BITS"},
      {"embedding=5,default=2",
       "entry 1 \"embedding=5\" (at character 1): width \"5\" is not one of 2, 3, 4, 1.58"},
      {"embedding=4,mhc,default=2", "entry 2 \"mhc\" (at character 13): expected PREFIX=BITS"},
      {"=4,default=2", "entry 1 \"=4\" (at character 1): no tensor prefix"},
      {"default=2,default=3", "entry 2 \"default=3\" (at character 11): default is given twice"},
      {"mhc=4,mhc=3,default=2",
       "entry 2 \"mhc=3\" (at character 7): prefix \"mhc\" is given twice"},
      {"layer03.q_proj=4,default=2",
       "per-layer rules do not exist: layers are matched as \"attn.q_proj\""},
      {"emb-edding=4,default=2", "prefix may use only letters"},
      {"default=1.5", "width \"1.5\""},
      {"default=", "width \"\""},
      {"default=2.0", "width \"2.0\""},
  };
  for (const BadScheme& c : cases) {
    absl::StatusOr<Scheme> s = ParseScheme(c.text);
    ASSERT_FALSE(s.ok()) << c.text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(s.status().message().find(c.expect), std::string::npos)
        << "scheme \"" << c.text << "\" gave: " << s.status().message();
    EXPECT_NE(s.status().message().find(std::string("\"") + c.text + "\""), std::string::npos)
        << "the error quotes the scheme: " << s.status().message();
  }
}

}  // namespace
}  // namespace cact

namespace cact {
namespace {

TEST(Scheme, RulesThatMatchNoTensorAreNamed) {
  std::vector<std::string> names;
  for (const TensorSpec& t : CanonicalLayout(Needle2Geometry(), {}))
    if (t.kind == TensorKind::kMatrix) names.push_back(t.name);
  EXPECT_TRUE(
      CheckRulesMatch(*ParseScheme("embedding=4,mhc=4,attn.out_proj=3,engram1=2,default=2"), names)
          .ok());
  absl::Status st = CheckRulesMatch(*ParseScheme("embeding=4,atn=3,mhc=4,default=2"), names);
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("\"embeding\", \"atn\" matches no CQ tensor"), std::string::npos)
      << st.message();
  // engram2 does not exist in a 2-site model.
  EXPECT_FALSE(CheckRulesMatch(*ParseScheme("engram2=4,default=2"), names).ok());
}

}  // namespace
}  // namespace cact
