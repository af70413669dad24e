// Accounting: the spec's "Released file, measured" table from the needle2 layout (no
// weights needed), and each fixture's case.json dtype_stats.
#include "formats/cact/accounting.h"

#include <gtest/gtest.h>

#include <fstream>

#include "formats/cact/cact_file.h"
#include "formats/needle/named_geometries.h"
#include "formats/needle/tensor_table.h"
#include "formats/cact/writer.h"
#include "nlohmann/json.hpp"
#include "support/needle2_accounting.h"
#include "support/test_support.h"

namespace cact {
namespace {

// The default scheme "embedding=4,mhc=4,default=2" picked by name here (formats/ must not
// use quant/'s scheme parser).
uint32_t DefaultSchemeBits(const std::string& name) {
  if (name == "embedding" || name.rfind("mhc", 0) == 0) return 4;
  return 2;
}

std::vector<TensorRecord> Needle2Records(uint64_t tokenizer_bytes) {
  const Geometry g = Needle2Geometry();
  const std::vector<ProbeHeadSpec> heads = {{ProbeHead::kContrastive, 4, 128},
                                            {ProbeHead::kConfidence, 8, 1}};
  std::vector<TensorRecord> records;
  for (const TensorSpec& spec : CanonicalLayout(g, heads)) {
    TensorRecord r;
    r.ndim = uint8_t(spec.shape.size());
    for (size_t k = 0; k < spec.shape.size(); ++k) r.shape[k] = spec.shape[k];
    if (spec.kind == TensorKind::kMatrix) {
      r.dtype = DType::kCQ;
      r.group = 128;
      r.bits = DefaultSchemeBits(spec.name);
      r.nbytes = CqBlobBytes(spec.shape[0], spec.shape[1], r.group, r.bits);
    } else if (spec.kind == TensorKind::kVector) {
      r.dtype = DType::kFP16;
      r.nbytes = r.NumElements() * 2;
    } else {
      r.dtype = DType::kRAW;
      r.nbytes = tokenizer_bytes;
    }
    records.push_back(r);
  }
  return records;
}

TEST(Accounting, ReleasedNeedle2Table) {
  std::vector<TensorRecord> records = Needle2Records(115215);
  ASSERT_EQ(records.size(), 405u);
  const uint64_t file_bytes = AssignOffsets(&records, 28);
  const Accounting a = ComputeAccounting(records, file_bytes);
  testing::ExpectReleasedNeedle2Classes(a);
  EXPECT_EQ(a[WidthClass::kRAW].tensors, 1u);
  EXPECT_EQ(a[WidthClass::kRAW].params, 0u);
  EXPECT_EQ(a[WidthClass::kRAW].bytes, 115215u);
  EXPECT_EQ(
      a[WidthClass::kCQ3].tensors + a[WidthClass::kCQ158].tensors + a[WidthClass::kFP32].tensors,
      0u);
  EXPECT_EQ(a.params, 43634423u);
  EXPECT_EQ(a.norm_bytes, 676096u);
  // The spec prints six decimals: compare at that precision.
  EXPECT_NEAR(a.code_weighted_bits, 2.255206, 5e-7);
  EXPECT_NEAR(a.payload_bpw, 2.493910, 5e-7);
  EXPECT_EQ(a.file_bytes, 13737807u);
  EXPECT_NEAR(a.file_bpw, 2.518710, 5e-7);
}

TEST(Accounting, NormBytesOfOneMatrix) {
  // For one CQ matrix without padding: bits + 16/group bits per weight.
  TensorRecord r;
  r.dtype = DType::kCQ;
  r.ndim = 2;
  r.shape = {512, 512, 0, 0};
  r.group = 128;
  r.bits = 2;
  r.nbytes = CqBlobBytes(512, 512, 128, 2);
  const Accounting a = ComputeAccounting(std::span<const TensorRecord>(&r, 1));
  EXPECT_EQ(a.norm_bytes, 512u * 4 * 2);
  EXPECT_DOUBLE_EQ(a.payload_bpw, 2 + 16.0 / 128);
}

class AccountingFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(AccountingFixtureTest, MatchesCaseJsonDtypeStats) {
  std::ifstream in(testing::Fixture(GetParam(), "case.json"));
  const nlohmann::json model = nlohmann::json::parse(in)["model"];
  auto f = CactFile::Open(testing::Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  const Accounting a = ComputeAccounting(*f);
  const auto& stats = model["dtype_stats"];
  size_t seen = 0;
  for (size_t c = 0; c < kNumWidthClasses; ++c) {
    const std::string name = WidthClassName(WidthClass(c));
    const ClassStats& s = a.classes[c];
    if (!stats.contains(name)) {
      EXPECT_EQ(s.tensors, 0u) << name;
      continue;
    }
    ++seen;
    EXPECT_EQ(s.tensors, stats[name]["tensors"].get<uint64_t>()) << name;
    EXPECT_EQ(s.params, stats[name]["params"].get<uint64_t>()) << name;
    EXPECT_EQ(s.bytes, stats[name]["bytes"].get<uint64_t>()) << name;
  }
  EXPECT_EQ(seen, stats.size());
  EXPECT_EQ(a.file_bytes, model["bytes"].get<uint64_t>());
}

INSTANTIATE_TEST_SUITE_P(Fixtures, AccountingFixtureTest, ::testing::Values("tiny", "odd"));

}  // namespace
}  // namespace cact
