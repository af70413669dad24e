// Every fixture written by the official exporter must open, name and shape its tensors as
// case.json says, and re-serialize byte for byte.
#include <gtest/gtest.h>

#include <fstream>
#include <map>

#include "formats/cact/cact_file.h"
#include "formats/cact/writer.h"
#include "formats/tokenizer_blob.h"
#include "lib/file_bytes.h"
#include "lib/sha256.h"
#include "nlohmann/json.hpp"
#include "support/needle_tokenizer.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::ReadAll;
using testing::TempDir;

nlohmann::json CaseJson(const std::string& kase) {
  std::ifstream f(Fixture(kase, "case.json"));
  return nlohmann::json::parse(f);
}

// Rebuilds the writer's input from a parsed file.
CactContents ContentsOf(const CactFile& f) {
  CactContents c;
  c.geometry = f.geometry();
  c.codebook.assign(f.codebook().begin(), f.codebook().end());
  for (const TensorEntry& t : f.tensors()) {
    auto blob = f.blob(t);
    c.tensors.push_back({t.name, t.record, std::vector<uint8_t>(blob.begin(), blob.end())});
  }
  return c;
}

class FixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(FixtureTest, OpensWithCaseJsonCountsNamesAndWidths) {
  const nlohmann::json cj = CaseJson(GetParam());
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->tensors().size(), cj["model"]["tensors"].get<size_t>());
  EXPECT_EQ(f->bytes().size(), cj["model"]["bytes"].get<size_t>());
  EXPECT_EQ(Sha256Hex(f->bytes().span()), cj["model"]["sha256"].get<std::string>());
  // Every CQ record named in record_bits, with that width; no other CQ records.
  const auto& bits = cj["record_bits"];
  size_t cq = 0;
  for (const TensorEntry& t : f->tensors()) {
    if (!t.is_cq()) {
      EXPECT_FALSE(bits.contains(t.name)) << t.name;
      continue;
    }
    ++cq;
    ASSERT_TRUE(bits.contains(t.name)) << t.name;
    const double want = bits[t.name].get<double>();
    const uint32_t rec_bits = t.record.bits;
    EXPECT_EQ(std::stod(WidthName(rec_bits)), want) << t.name;
    EXPECT_EQ(t.record.group, cj["group"].get<uint32_t>()) << t.name;
  }
  EXPECT_EQ(cq, bits.size());
  EXPECT_EQ(f->tensors().back().name, "tokenizer");
  EXPECT_EQ(f->codebook_group(), 128u);
}

TEST_P(FixtureTest, NamesAndShapesMatchWeightsSafetensorsHeader) {
  // weights.safetensors lists every non-tokenizer record with its canonical name and
  // logical shape; read its JSON header directly (independent of our safetensors reader).
  const std::vector<uint8_t> st = ReadAll(Fixture(GetParam(), "weights.safetensors"));
  ASSERT_GE(st.size(), 8u);
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | st[i];
  const nlohmann::json h = nlohmann::json::parse(st.begin() + 8, st.begin() + 8 + n);
  std::vector<std::pair<uint64_t, std::string>> by_offset;
  for (auto it = h.begin(); it != h.end(); ++it)
    if (it.key() != "__metadata__") by_offset.push_back({it.value()["data_offsets"][0], it.key()});
  std::sort(by_offset.begin(), by_offset.end());

  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(by_offset.size() + 1, f->tensors().size());
  for (size_t i = 0; i < by_offset.size(); ++i) {
    const TensorEntry& t = f->tensors()[i];
    EXPECT_EQ(t.name, by_offset[i].second) << "position " << i;
    EXPECT_EQ(t.shape(), h[by_offset[i].second]["shape"].get<std::vector<uint32_t>>()) << t.name;
  }
}

TEST_P(FixtureTest, GeometryMatchesCaseJson) {
  const nlohmann::json cj = CaseJson(GetParam());
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  const Geometry& g = f->geometry();
  const auto& c = cj["config"];
  const auto& geo = cj["geometry"];
  EXPECT_EQ(g.vocab, c["vocab_size"].get<uint32_t>());
  EXPECT_EQ(g.d_model, c["d_model"].get<uint32_t>());
  EXPECT_EQ(g.attn_dim(), c["attn_dim"].get<uint32_t>());
  EXPECT_EQ(g.num_heads, c["num_heads"].get<uint32_t>());
  EXPECT_EQ(g.num_kv_heads, c["num_kv_heads"].get<uint32_t>());
  EXPECT_EQ(g.num_layers, c["num_layers"].get<uint32_t>());
  EXPECT_EQ(g.max_seq_len, c["max_seq_len"].get<uint32_t>());
  EXPECT_EQ(g.rope_theta, c["rope_theta"].get<float>());
  EXPECT_EQ(g.mhc_lanes, c["mhc_lanes"].get<uint32_t>());
  EXPECT_EQ(g.engram_slots, c["engram_slots"].get<uint32_t>());
  EXPECT_EQ(g.kv_bits, c["kv_bits"].get<uint32_t>());
  EXPECT_EQ(g.kv_window, cj["kv_window_header"].get<uint32_t>());
  EXPECT_EQ(g.head_dim, geo["head_dim"].get<uint32_t>());
  EXPECT_EQ(g.hada_n, geo["hada_n"].get<uint32_t>());
  EXPECT_EQ(g.engram_sub_dim, geo["sub"].get<uint32_t>());
  EXPECT_EQ(g.num_engram_tables, geo["num_tables"].get<uint32_t>());
  EXPECT_EQ(g.heads_per_order(), geo["heads"].get<uint32_t>() ? geo["heads"].get<uint32_t>() : 1u);
  const auto orders = geo["orders"].get<std::vector<uint32_t>>();
  ASSERT_EQ(g.num_engram_orders, orders.size());
  for (size_t i = 0; i < orders.size(); ++i) EXPECT_EQ(g.engram_orders[i], orders[i]);
  const auto sites = c["engram_layers"].get<std::vector<uint32_t>>();
  ASSERT_EQ(g.num_engram_sites, sites.size());
  for (size_t i = 0; i < sites.size(); ++i) {
    EXPECT_EQ(g.engram_sites[i], sites[i]);
    EXPECT_EQ(g.EngramSiteAt(sites[i]), int(i));
  }
}

TEST_P(FixtureTest, ProbeHeadsDetected) {
  const nlohmann::json cj = CaseJson(GetParam());
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  const auto names = cj["heads"].get<std::vector<std::string>>();
  ASSERT_EQ(f->probe_heads().size(), names.size());
  for (size_t i = 0; i < names.size(); ++i) {
    const ProbeHeadSpec& h = f->probe_heads()[i];
    EXPECT_EQ(h.name(), names[i]);
    if (h.kind == ProbeHead::kContrastive) {
      EXPECT_EQ(h.probes, 4u);
      EXPECT_EQ(h.out_dim, cj["config"]["contrastive_dim"].get<uint32_t>());
    } else {
      EXPECT_EQ(h.probes, 8u);
      EXPECT_EQ(h.out_dim, 1u);
    }
  }
}

uint32_t FloatBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}

// codebooks.json: official float32 hex per width and group.
std::vector<uint32_t> OfficialCodebook(const std::string& kase, uint32_t bits, uint32_t group) {
  std::ifstream in(Fixture(kase, "codebooks.json"));
  const nlohmann::json cb = nlohmann::json::parse(in)["codebooks"];
  const std::string key = "bits" + WidthName(bits) + "_group" + std::to_string(group);
  std::vector<uint32_t> out;
  for (const auto& h : cb.at(key)["hex"])
    out.push_back(uint32_t(std::stoul(h.get<std::string>(), nullptr, 16)));
  return out;
}

TEST_P(FixtureTest, CodebookEqualsOfficialGroup128) {
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  for (uint32_t bits : {2u, 3u, 4u, kTernaryBits}) {
    const std::vector<uint32_t> want = OfficialCodebook(GetParam(), bits, 128);
    const std::vector<float> got = f->CodebookFor(bits, 128);
    ASSERT_EQ(got.size(), want.size()) << bits;
    for (size_t i = 0; i < want.size(); ++i)
      EXPECT_EQ(FloatBits(got[i]), want[i]) << bits << "[" << i << "]";
  }
}

TEST_P(FixtureTest, CodebookForOtherGroups) {
  // Ternary is analytic: exact at every group. Stored CQ codebooks rescaled from group 128
  // (float32 values times sqrt(128/g)) may differ from the official float32(c/sqrt(g)) by
  // the one rounding of the stored value: allow 1 ulp.
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  for (uint32_t group : {32u, 64u, 256u}) {
    for (uint32_t bits : {2u, 3u, 4u, kTernaryBits}) {
      const std::vector<uint32_t> want = OfficialCodebook(GetParam(), bits, group);
      const std::vector<float> got = f->CodebookFor(bits, group);
      ASSERT_EQ(got.size(), want.size());
      for (size_t i = 0; i < want.size(); ++i) {
        const int64_t diff = int64_t(FloatBits(got[i])) - int64_t(want[i]);
        if (bits == kTernaryBits)
          EXPECT_EQ(diff, 0) << "g" << group << " [" << i << "]";
        else
          EXPECT_LE(std::abs(diff), 1) << "CQ" << bits << " g" << group << " [" << i << "]";
      }
    }
  }
}

TEST_P(FixtureTest, WriterReserializesByteIdentical) {
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  const CactContents c = ContentsOf(*f);
  auto bytes = SerializeCact(c);
  ASSERT_TRUE(bytes.ok()) << bytes.status();
  const std::vector<uint8_t> original = ReadAll(Fixture(GetParam(), "model.cact"));
  EXPECT_TRUE(*bytes == original);

  TempDir dir;
  ASSERT_TRUE(WriteCact(dir / "copy.cact", c).ok());
  EXPECT_TRUE(ReadAll(dir / "copy.cact") == original);
  ASSERT_TRUE(WriteCact(dir / "copy.cact.zst", c, 3).ok());
  const std::vector<uint8_t> zst = ReadAll(dir / "copy.cact.zst");
  EXPECT_TRUE(IsZstd(zst));
  EXPECT_LT(zst.size(), original.size());
  auto z = CactFile::Open(dir / "copy.cact.zst");
  ASSERT_TRUE(z.ok()) << z.status();
  EXPECT_TRUE(z->bytes().decompressed());
  EXPECT_TRUE(std::equal(z->bytes().span().begin(), z->bytes().span().end(), original.begin(),
                         original.end()));
  // No temporary files are left behind.
  size_t files = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir.path())) {
    (void)e;
    ++files;
  }
  EXPECT_EQ(files, 2u);
}

TEST_P(FixtureTest, WriterRejectsMisplacedName) {
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  CactContents c = ContentsOf(*f);
  c.tensors[2].name = "layer00.k_proj";
  auto bytes = SerializeCact(c);
  ASSERT_FALSE(bytes.ok());
  EXPECT_NE(bytes.status().message().find("'layer00.q_proj'"), std::string::npos) << bytes.status();
}

TEST_P(FixtureTest, TokenizerBlobRoundTrip) {
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  auto blob = f->tokenizer_blob();
  auto tok = ParseTokenizerBlob(blob);
  ASSERT_TRUE(tok.ok()) << tok.status();
  testing::ExpectNeedleTokenizerShape(*tok, f->geometry().vocab);
  const std::vector<uint8_t> again = SerializeTokenizerBlob(*tok);
  EXPECT_TRUE(std::equal(again.begin(), again.end(), blob.begin(), blob.end()));
}

INSTANTIATE_TEST_SUITE_P(Fixtures, FixtureTest, ::testing::Values("tiny", "odd"));

}  // namespace
}  // namespace cact
