// InferScheme: the rule list reproduces every CQ record's width. Generation 2 is read in the
// spec's scheme language (`layerNN.` as `attn.`); generation 3 folds its layers into `attn.`
// only where every layer agrees, and otherwise names the layers' records.
#include <gtest/gtest.h>

#include "formats/cact/cact3_file.h"
#include "formats/cact/cact_file.h"
#include "lib/file_bytes.h"
#include "quant/scheme.h"
#include "quant/scheme_inference.h"
#include "support/needle3_synthetic.h"
#include "support/test_support.h"

namespace cact {
namespace {

// Every CQ record's width is what the inferred rules give its name.
void ExpectReproduces(const CactFile& f, const std::string& text) {
  Scheme s;
  s.default_bits = 0;
  const size_t cut = text.rfind("default=");
  ASSERT_NE(cut, std::string::npos) << text;
  std::string rules = text.substr(0, cut);
  while (!rules.empty()) {
    const size_t comma = rules.find(','), eq = rules.find('=');
    s.rules.emplace_back(rules.substr(0, eq), std::stoul(rules.substr(eq + 1, comma - eq - 1)));
    rules = rules.substr(comma + 1);
  }
  s.default_bits = std::stoul(text.substr(cut + 8));
  for (const TensorEntry& t : f.tensors())
    if (t.is_cq()) {
      const std::string match = f.generation() == 2 || text.find("attn.") != std::string::npos
                                    ? SchemeMatchName(t.name)
                                    : t.name;
      EXPECT_EQ(s.BitsForMatchName(match), t.record.bits) << t.name << " in " << text;
    }
}

TEST(SchemeInference, Needle2FixturesInTheSpecLanguage) {
  for (const auto& [kase, want] :
       {std::pair<std::string, std::string>{"tiny", "embedding=4,mhc=4,default=2"},
        {"odd", "embedding=4,mhc=3,default=2"}}) {
    auto f = CactFile::Open(testing::Fixture(kase, "model.cact"));
    ASSERT_TRUE(f.ok()) << f.status();
    const std::string got = InferScheme(*f);
    EXPECT_EQ(got, want) << kase;
    EXPECT_TRUE(ParseScheme(got).ok()) << got;  // cact-quant accepts it
    ExpectReproduces(*f, got);
  }
}

absl::StatusOr<Cact3File> Synth3(std::function<uint32_t(const std::string&)> bits,
                                 Layout3Options layout = {}) {
  testing::Synth3Options o;
  o.group = 32;
  o.bits = std::move(bits);
  o.layout = std::move(layout);
  return Cact3File::FromBytes(FileBytes::FromBuffer("m.cact", testing::SynthesizeCact3(o)));
}

TEST(SchemeInference, Needle3LayersThatAgreeAreFolded) {
  Layout3Options heads;
  heads.heads = {testing::Head3(ProbeHead3::kEmbedding, 2, 2, 16)};
  auto f = Synth3(
      [](const std::string& n) {
        if (n == "embedding" || n.find("k_proj") != std::string::npos) return 4u;
        return n.find("q_proj") != std::string::npos ? 3u : 2u;
      },
      heads);
  ASSERT_TRUE(f.ok()) << f.status();
  // "embedding" alone would also cover embedding_head.*, which is CQ2.
  const std::string got = InferScheme(f->records());
  EXPECT_EQ(got, "embedding=4,attn.q=3,attn.k=4,embedding_head=2,default=2");
  ExpectReproduces(f->records(), got);
}

TEST(SchemeInference, Needle3LayersThatDifferAreNamed) {
  // Only layer 1's q_proj is CQ4: read as attn.q_proj it would claim every layer's.
  auto f = Synth3([](const std::string& n) { return n == "layer01.q_proj" ? 4u : 2u; });
  ASSERT_TRUE(f.ok()) << f.status();
  const std::string got = InferScheme(f->records());
  EXPECT_EQ(got, "layer01.q=4,default=2");
  ExpectReproduces(f->records(), got);
  // The shipped widths (CQ4 embedding, mHC and head matrices).
  Layout3Options confidence;
  confidence.heads = {testing::Head3(ProbeHead3::kConfidence, 4, 4, 1)};
  auto shipped = Synth3(testing::ShippedBits3, confidence);
  ASSERT_TRUE(shipped.ok()) << shipped.status();
  EXPECT_EQ(InferScheme(shipped->records()), "embedding=4,mhc=4,confidence=4,default=2");
}

}  // namespace
}  // namespace cact
