// Positional naming: tensor counts, head detection from the count, scheme match names.
#include "formats/needle/tensor_table.h"

#include <gtest/gtest.h>

#include "formats/cact/header.h"
#include "formats/needle/named_geometries.h"

#include <set>

namespace cact {
namespace {

TEST(Layout, Needle2Counts) {
  const Geometry g = Needle2Geometry();
  EXPECT_EQ(CoreTensorCount(g), 397u);
  EXPECT_EQ(TotalTensorCount(g, 0), 398u);
  EXPECT_EQ(TotalTensorCount(g, 2), 405u);
  EXPECT_EQ(ProbeHeadCount(g, 405), 2u);
  EXPECT_EQ(ProbeHeadCount(g, 398), 0u);
  EXPECT_EQ(ProbeHeadCount(g, 402), 1u);
  EXPECT_FALSE(ProbeHeadCount(g, 399).has_value());
  EXPECT_FALSE(ProbeHeadCount(g, 404).has_value());
  EXPECT_FALSE(ProbeHeadCount(g, 10).has_value());
}

TEST(Layout, Needle2NamesAndShapes) {
  const Geometry g = Needle2Geometry();
  const auto layout =
      CanonicalLayout(g, {{ProbeHead::kContrastive, 4, 128}, {ProbeHead::kConfidence, 8, 1}});
  ASSERT_EQ(layout.size(), 405u);
  std::set<std::string> names;
  for (const auto& t : layout) EXPECT_TRUE(names.insert(t.name).second) << "duplicate " << t.name;
  auto find = [&](const std::string& n) -> const TensorSpec& {
    for (const auto& t : layout)
      if (t.name == n) return t;
    ADD_FAILURE() << n;
    return layout.front();
  };
  EXPECT_EQ(layout[0].name, "embedding");
  EXPECT_EQ(layout[0].shape, (std::vector<uint32_t>{8192, 512}));
  EXPECT_EQ(layout[1].name, "layer00.norm_in");
  EXPECT_EQ(find("layer26.out_proj").shape, (std::vector<uint32_t>{512, 512}));
  EXPECT_EQ(find("layer26.k_proj").shape, (std::vector<uint32_t>{256, 512}));
  EXPECT_EQ(find("layer03.q_norm").shape, (std::vector<uint32_t>{64}));
  EXPECT_EQ(find("layer03.d2").shape, (std::vector<uint32_t>{512}));
  EXPECT_EQ(find("mhc_b_res").shape, (std::vector<uint32_t>{27, 4, 4}));
  EXPECT_EQ(find("mhc_phi_pre").shape, (std::vector<uint32_t>{108, 2048}));
  EXPECT_EQ(find("mhc_phi_res").shape, (std::vector<uint32_t>{432, 2048}));
  EXPECT_EQ(find("engram1.tables").shape, (std::vector<uint32_t>{32768, 128}));
  EXPECT_EQ(find("engram1.key_proj").shape, (std::vector<uint32_t>{512, 512}));
  EXPECT_EQ(find("engram0.taps").shape, (std::vector<uint32_t>{4, 512}));
  EXPECT_EQ(find("heads.manifest").shape, (std::vector<uint32_t>{2}));
  EXPECT_EQ(find("contrastive_head.proj").shape, (std::vector<uint32_t>{128, 2048}));
  EXPECT_EQ(find("confidence_head.proj").shape, (std::vector<uint32_t>{1, 4096}));
  EXPECT_EQ(find("confidence_head.bias").shape, (std::vector<uint32_t>{1}));
  EXPECT_EQ(layout[396].name, "final_norm");
  EXPECT_EQ(layout.back().name, "tokenizer");
  EXPECT_EQ(layout.back().kind, TensorKind::kTokenizer);
  size_t matrices = 0;
  for (const auto& t : layout) matrices += t.kind == TensorKind::kMatrix;
  EXPECT_EQ(matrices, 145u);  // 141 CQ2 + 4 CQ4 in the released file
}

TEST(Layout, SchemeMatchName) {
  EXPECT_EQ(SchemeMatchName("layer03.q_proj"), "attn.q_proj");
  EXPECT_EQ(SchemeMatchName("layer26.d1"), "attn.d1");
  EXPECT_EQ(SchemeMatchName("mhc_phi_pre"), "mhc_phi_pre");
  EXPECT_EQ(SchemeMatchName("engram1.tables"), "engram1.tables");
  EXPECT_EQ(SchemeMatchName("embedding"), "embedding");
  EXPECT_EQ(SchemeMatchName("layers.x"), "layers.x");
}

TEST(Layout, EngramSiteAt) {
  const Geometry g = Needle2Geometry();
  EXPECT_EQ(g.EngramSiteAt(2), 0);
  EXPECT_EQ(g.EngramSiteAt(15), 1);
  EXPECT_EQ(g.EngramSiteAt(0), -1);  // unused site slots are 0 but beyond num_engram_sites
  EXPECT_EQ(g.heads_per_order(), 2u);
}

TEST(Header, RoundTripAndCqSizes) {
  Header h;
  h.num_tensors = 405;
  const auto bytes = SerializeHeader(h);
  const Header back = ParseHeader(bytes.data());
  EXPECT_EQ(SerializeHeader(back), bytes);
  EXPECT_TRUE(ValidateHeader(back, "x").ok());
  // 120 + 4*28 + 44*405 = 18052 -> next multiple of 64 is 18112.
  EXPECT_EQ(FirstBlobOffset(28, 405), 18112u);
  EXPECT_EQ(CqBlobBytes(256, 128, 128, 2), 256u * 32 + 256u * 2);
  EXPECT_EQ(CqBlobBytes(96, 96, 128, 2), 96u * 32 + 96u * 2);          // padded row
  EXPECT_EQ(CqBlobBytes(10, 128, 128, kTernaryBits), 10u * 32 + 20u);  // 2-bit crumbs
  EXPECT_EQ(CqBlobBytes(10, 128, 128, 3), 10u * 48 + 20u);
  bool overflow = false;
  EXPECT_EQ(CqBlobBytes(UINT64_MAX / 2, 1u << 20, 128, 4, &overflow), 0u);
  EXPECT_TRUE(overflow);
  EXPECT_EQ(CqRowCodeBytes(24, 128, 4), 64u);
}

// Each CQ type's row: its codebook fits its codes, stored codes map to entries and back
// (ternary: trits -1, 0, +1 as crumbs 3, 0, 1; crumb 2 reads past the codebook), and its
// packed row bytes are the records'.
TEST(CqTypes, RowsDescribeEachWidth) {
  for (const CqType& t : kCqTypes) {
    SCOPED_TRACE(t.name);
    EXPECT_EQ(FindCqType(t.bits), &t);
    EXPECT_EQ(FindCqTypeByWidth(t.width), &t);
    EXPECT_LE(t.levels, 1u << t.code_bits);
    EXPECT_EQ(t.ternary, t.levels < (1u << t.code_bits));
    for (uint32_t index = 0; index < t.levels; ++index) {
      EXPECT_LT(t.StoredCode(index), 1u << t.code_bits);
      EXPECT_EQ(t.CodebookIndex(t.StoredCode(index)), index);
    }
    for (uint64_t in : {1u, 96u, 128u, 300u})
      EXPECT_EQ(t.RowBytes(in, 128), CqRowCodeBytes(in, 128, t.bits));
  }
  const CqType& ternary = *FindCqType(kTernaryBits);
  EXPECT_EQ(ternary.StoredCode(0), 3u);
  EXPECT_EQ(ternary.StoredCode(1), 0u);
  EXPECT_EQ(ternary.StoredCode(2), 1u);
  EXPECT_GE(ternary.CodebookIndex(2), ternary.levels);
  EXPECT_EQ(FindCqType(3)->RowBytes(96, 32), 36u);
}

}  // namespace
}  // namespace cact
