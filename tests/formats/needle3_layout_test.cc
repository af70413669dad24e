// Generation 3 at container level: a synthetic file with the shipped needle3.cact's geometry
// reproduces its committed directory record for record (offset, size, shape, width), the
// canonical names follow the exporter's documented order, the layout variants open, the
// accounting adds up from the directory alone, and CactFile::Open refuses generation 3.
#include <gtest/gtest.h>

#include <array>
#include <fstream>
#include <sstream>

#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "formats/cact/accounting.h"
#include "formats/cact/any_generation.h"
#include "formats/cact/cact3_file.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/finite_check.h"
#include "formats/needle/named_geometries.h"
#include "lib/file_bytes.h"
#include "support/needle3_synthetic.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Head3;
using testing::ShippedBits3;
using testing::Synth3Options;
using testing::SynthesizeCact3;

struct Row {
  uint32_t dtype;
  std::vector<uint32_t> shape;
  uint64_t offset, nbytes;
  uint32_t group, bits;
};

std::vector<Row> ShippedDirectory() {
  std::ifstream f(std::string(CACT_SOURCE_DIR) + "/tests/formats/data/needle3_directory.tsv");
  std::vector<Row> rows;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> c = absl::StrSplit(line, '\t');
    EXPECT_EQ(c.size(), 7u) << line;
    if (c.size() != 7) continue;
    EXPECT_EQ(std::stoul(c[0]), rows.size()) << line;
    Row r{uint32_t(std::stoul(c[1])), {},
          std::stoull(c[3]),          std::stoull(c[4]),
          uint32_t(std::stoul(c[5])), uint32_t(std::stoul(c[6]))};
    if (c[2] != "-")
      for (absl::string_view d : absl::StrSplit(c[2], ','))
        r.shape.push_back(std::stoul(std::string(d)));
    rows.push_back(r);
  }
  return rows;
}

// The exporter's documented order, written out here rather than taken from the library.
std::vector<std::string> ShippedNames() {
  static const char* kLayer[] = {
      "norm_in", "q_proj", "k_proj",    "v_proj",   "q_taps",    "k_taps",    "v_taps",
      "q_norm",  "k_norm", "gate_proj", "out_proj", "post_norm", "attn_gate", "pre_hada",
      "d1",      "d2",     "b2",        "d3",       "d4",        "w1a",       "w1b",
      "w2a",     "w2b",    "w3a",       "w3b",      "cond_v",    "cond_u"};
  std::vector<std::string> n = {"embedding"};
  for (int l = 0; l < 20; ++l)
    for (const char* t : kLayer) n.push_back(absl::StrFormat("layer%02d.%s", l, t));
  for (const char* t :
       {"mhc_a_pre", "mhc_a_post", "mhc_a_res", "mhc_b_pre", "mhc_b_post", "mhc_b_res",
        "mhc_phi_pre", "mhc_phi_post", "mhc_phi_res", "hada_p1", "hada_p2"})
    n.push_back(t);
  for (int s = 0; s < 5; ++s)
    for (const char* t : {"tables", "key_proj", "value_proj", "taps"})
      n.push_back(absl::StrFormat("engram%d.%s", s, t));
  n.push_back("final_norm");
  n.push_back("heads.manifest");
  for (const char* t : {"probes", "gain", "query", "row_bias", "proj", "bias"})
    n.push_back(std::string("confidence_head.") + t);
  n.push_back("tokenizer");
  return n;
}

absl::StatusOr<Cact3File> Open3(std::vector<uint8_t> bytes, const std::string& name = "m.cact") {
  return Cact3File::FromBytes(FileBytes::FromBuffer(name, std::move(bytes)));
}

TEST(Needle3Layout, SyntheticShippedGeometryReproducesTheShippedDirectory) {
  const std::vector<Row> rows = ShippedDirectory();
  ASSERT_EQ(rows.size(), 581u);
  Synth3Options o;
  o.geometry = Needle3Geometry();
  // The shipped file's one head: 21 rows x 4 probes, 4 queries, output 1 (confidence).
  o.layout.heads = {Head3(ProbeHead3::kConfidence, 4, 4, 1)};
  o.bits = ShippedBits3;
  o.tokenizer_pieces = 8192;
  o.tokenizer_bytes = rows.back().nbytes;  // 109,140 bytes
  std::vector<uint8_t> bytes = SynthesizeCact3(o);
  EXPECT_EQ(bytes.size(), 35335380u);
  auto f = Open3(std::move(bytes));
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<std::string> names = ShippedNames();
  ASSERT_EQ(f->tensors().size(), rows.size());
  ASSERT_EQ(names.size(), rows.size());
  for (size_t i = 0; i < rows.size(); ++i) {
    const TensorEntry& t = f->tensors()[i];
    SCOPED_TRACE(absl::StrFormat("record %d (%s)", i, t.name));
    EXPECT_EQ(t.name, names[i]);
    EXPECT_EQ(uint32_t(t.record.dtype), rows[i].dtype);
    EXPECT_EQ(t.shape(), rows[i].shape);
    EXPECT_EQ(t.record.offset, rows[i].offset);
    EXPECT_EQ(t.record.nbytes, rows[i].nbytes);
    EXPECT_EQ(t.record.group, rows[i].group);
    EXPECT_EQ(t.record.bits, rows[i].bits);
  }
  EXPECT_EQ(f->header().num_tensors, 581u);
  EXPECT_EQ(f->probe_heads().size(), 1u);
  EXPECT_FALSE(f->layout().headwise_gate);
  EXPECT_FALSE(f->layout().untied_factors);
  EXPECT_EQ(f->records().generation(), 3);
  EXPECT_EQ(f->records().codebook_group(), 128u);
  EXPECT_EQ(CheckFinite(f->records()), absl::OkStatus());

  // Accounting from the committed directory alone against the library's.
  uint64_t params = 0, cq_params = 0, payload = 0, cq = 0, fp16 = 0, fp32 = 0;
  for (const Row& r : rows) {
    if (r.dtype == 4) continue;
    uint64_t n = 1;
    for (uint32_t d : r.shape) n *= d;
    params += n;
    payload += r.nbytes;
    if (r.dtype == 3) cq_params += n;
    (r.dtype == 3 ? cq : r.dtype == 1 ? fp16 : fp32)++;
  }
  const Accounting a = ComputeAccounting(f->records());
  EXPECT_EQ(a.params, params);
  EXPECT_EQ(a.cq_params, cq_params);
  EXPECT_EQ(a.payload_bytes, payload);
  EXPECT_EQ(a[WidthClass::kCQ2].tensors + a[WidthClass::kCQ4].tensors, cq);
  EXPECT_EQ(a[WidthClass::kFP16].tensors, fp16);
  EXPECT_EQ(a[WidthClass::kFP32].tensors, fp32);
  EXPECT_EQ(a[WidthClass::kRAW].bytes, 109140u);
  EXPECT_DOUBLE_EQ(a.file_bpw, 35335380.0 * 8 / double(params));
  RecordProperty("params", std::to_string(params));
}

TEST(Needle3Layout, VariantsOpenWithTheirNames) {
  struct Case {
    const char* what;
    uint32_t taps;
    Layout3Options layout;
    std::vector<std::string> expect;  // names that must be there
  };
  Layout3Options all_heads;
  all_heads.heads = {Head3(ProbeHead3::kEmbedding, 2, 2, 16),
                     Head3(ProbeHead3::kConfidence, 3, 2, 1), Head3(ProbeHead3::kRouter, 2, 3, 3)};
  Layout3Options float_heads;
  float_heads.heads = {Head3(ProbeHead3::kRouter, 2, 2, 3, /*quantized=*/false)};
  Layout3Options headwise;
  headwise.headwise_gate = true;
  headwise.untied_factors = true;
  const std::vector<Case> cases = {
      {"no heads", 3, {}, {"layer02.v_taps", "engram1.taps", "final_norm"}},
      {"three heads",
       3,
       all_heads,
       {"embedding_head.probes", "confidence_head.row_bias", "router_head.calibration"}},
      {"no QKV taps", 0, {}, {"layer00.q_norm"}},
      {"all-float heads", 3, float_heads, {"router_head.probes"}},
      {"headwise gate, untied factors", 3, headwise, {"layer01.w3b"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    Synth3Options o;
    o.geometry = SmallGeometry3();
    o.geometry.qkv_conv_taps = c.taps;
    o.layout = c.layout;
    o.group = 32;
    auto f = Open3(SynthesizeCact3(o));
    ASSERT_TRUE(f.ok()) << f.status();
    const uint32_t core = CoreTensorCount3(o.geometry);
    EXPECT_EQ(f->tensors().size(), core + HeadTensorCount3(c.layout.heads) + 1);
    EXPECT_EQ(f->layout().headwise_gate, c.layout.headwise_gate);
    EXPECT_EQ(f->layout().untied_factors, c.layout.untied_factors);
    ASSERT_EQ(f->probe_heads().size(), c.layout.heads.size());
    for (size_t h = 0; h < c.layout.heads.size(); ++h) {
      EXPECT_EQ(f->probe_heads()[h].kind, c.layout.heads[h].kind);
      EXPECT_EQ(f->probe_heads()[h].probes, c.layout.heads[h].probes);
      EXPECT_EQ(f->probe_heads()[h].queries, c.layout.heads[h].queries);
      EXPECT_EQ(f->probe_heads()[h].out_dim, c.layout.heads[h].out_dim);
      EXPECT_EQ(f->probe_heads()[h].quantized, c.layout.heads[h].quantized);
    }
    for (const std::string& n : c.expect) EXPECT_NE(f->Find(n), nullptr) << n;
    EXPECT_EQ(f->Find("layer00.q_taps") != nullptr, c.taps != 0);
    EXPECT_EQ(f->tensors().back().name, "tokenizer");
  }
}

// Shapes that follow from the small geometry (qk 16, v 8, 4/2 heads, hada 64 = 8 x 8).
TEST(Needle3Layout, ShapesFollowTheGeometry) {
  Synth3Options o;
  o.geometry = SmallGeometry3();
  o.group = 32;
  auto f = Open3(SynthesizeCact3(o));
  ASSERT_TRUE(f.ok()) << f.status();
  const std::vector<std::pair<std::string, std::vector<uint32_t>>> want = {
      {"embedding", {64, 64}},        {"layer00.q_proj", {64, 64}},
      {"layer00.k_proj", {32, 64}},   {"layer00.v_proj", {16, 64}},
      {"layer00.q_taps", {3, 64}},    {"layer00.v_taps", {3, 16}},
      {"layer00.q_norm", {16}},       {"layer00.gate_proj", {32, 64}},
      {"layer00.out_proj", {64, 32}}, {"layer00.b2", {64}},
      {"layer00.w2a", {8, 8}},        {"layer00.cond_v", {64, 8}},
      {"layer00.cond_u", {8, 64}},    {"mhc_b_res", {3, 2, 2}},
      {"mhc_phi_res", {12, 128}},     {"hada_p2", {64}},
      {"engram1.tables", {32, 32}},   {"engram1.key_proj", {64, 64}},
      {"engram1.taps", {4, 64}},
  };
  for (const auto& [name, shape] : want) {
    const TensorEntry* t = f->Find(name);
    ASSERT_NE(t, nullptr) << name;
    EXPECT_EQ(t->shape(), shape) << name;
  }
  EXPECT_EQ(f->Find("hada_p1")->record.dtype, DType::kFP32);
}

// The exporter's split a = 2^(bit_length(n - 1) / 2), b = n / a (not a square root).
TEST(Needle3Layout, MonarchFactorsOfNonSquareSizes) {
  const std::vector<std::array<uint32_t, 3>> cases = {{1, 1, 1},     {2, 1, 2},     {64, 8, 8},
                                                      {128, 8, 16},  {512, 16, 32}, {1024, 32, 32},
                                                      {2048, 32, 64}};
  for (const auto& [n, a, b] : cases) {
    Geometry3 g;
    g.hada_n = n;
    EXPECT_EQ(g.hada_blocks(), std::make_pair(a, b)) << n;
  }
  // A d_model whose hada_n (128) is not a square: the factor shapes follow.
  Synth3Options o;
  o.geometry = SmallGeometry3();
  o.geometry.d_model = 128;
  o.geometry.hada_n = 128;
  o.geometry.engram_sub_dim = 64;
  o.group = 32;
  auto f = Open3(SynthesizeCact3(o));
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->Find("layer00.w1a")->shape(), (std::vector<uint32_t>{8, 8}));
  EXPECT_EQ(f->Find("layer00.w1b")->shape(), (std::vector<uint32_t>{16, 16}));
}

TEST(Needle3Layout, EveryProgramsOpenPointRefusesGenerationThree) {
  Synth3Options o;
  o.geometry = SmallGeometry3();
  o.group = 32;
  const std::vector<uint8_t> bytes = SynthesizeCact3(o);
  const std::string line =
      "m.cact: a Needle 3 file (generation 3, tag 0x05E12A84): this version runs, rebuilds and "
      "converts generation 2 files; cact-inspect reads generation 3";
  auto f = CactFile::FromBytes(FileBytes::FromBuffer("m.cact", bytes));
  ASSERT_FALSE(f.ok());
  EXPECT_EQ(f.status().message(), line);
  EXPECT_EQ(f.status().code(), absl::StatusCode::kUnimplemented);
  // The header alone is enough to be refused the same way.
  auto head = CactFile::FromBytes(
      FileBytes::FromBuffer("m.cact", std::vector<uint8_t>(bytes.begin(), bytes.begin() + 4)));
  EXPECT_EQ(head.status().message(), line);
  testing::TempDir dir;
  testing::WriteAll(dir / "m.cact", bytes);
  auto opened = CactFile::Open(dir / "m.cact");
  EXPECT_EQ(opened.status().message(), dir / line);
  // The reader of both generations opens it.
  auto any = OpenAnyGeneration(dir / "m.cact");
  ASSERT_TRUE(any.ok()) << any.status();
  EXPECT_EQ(any->generation(), 3);
  EXPECT_EQ(&any->records(), &any->gen3->records());
  auto gen2 = OpenAnyGeneration(testing::Fixture("tiny", "model.cact"));
  ASSERT_TRUE(gen2.ok()) << gen2.status();
  EXPECT_EQ(gen2->generation(), 2);
  EXPECT_EQ(gen2->records().generation(), 2);
}

}  // namespace
}  // namespace cact
