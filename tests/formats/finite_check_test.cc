// The finite check on every kind of stored float and at every position within the words it
// scans four halves at a time: each planted NaN / Inf is found once, with its record,
// element or group, and byte offset; the clean fixtures pass.
#include <cmath>
#include <cstring>

#include <gtest/gtest.h>

#include "formats/cact/cact_file.h"
#include "formats/cact/finite_check.h"
#include "formats/cact/header.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::ReadAll;

// FP16 records that hold values (the probe-head manifest holds codes, checked at open).
bool HoldsValues(const TensorEntry& t) {
  return t.record.dtype == DType::kFP16 && t.name.find("manifest") == std::string::npos;
}

CactFile FromBytes(std::vector<uint8_t> bytes) {
  absl::StatusOr<CactFile> f = CactFile::FromBytes(FileBytes::FromBuffer("m.cact", bytes));
  EXPECT_TRUE(f.ok()) << f.status();
  return std::move(*f);
}

TEST(FiniteCheck, TheFixturesAreFinite) {
  for (const std::string& kase : testing::FixtureCases()) {
    const CactFile f = FromBytes(ReadAll(Fixture(kase, "model.cact")));
    uint64_t total = 7;
    EXPECT_TRUE(FindNonFinite(f, 10, &total).empty()) << kase;
    EXPECT_EQ(total, 0u);
    EXPECT_TRUE(CheckFinite(f).ok()) << kase;
  }
}

struct Plant {
  std::string tensor;
  bool norm;         // a CQ group norm (counted from the end of the blob), else an element
  uint64_t index;    // element, or group counted from the last one
  uint16_t half;     // the value planted
  std::string name;  // "NaN", "+Inf", "-Inf"
};

TEST(FiniteCheck, FindsEachPlantedValueWhereItIs) {
  const std::vector<uint8_t> clean = ReadAll(Fixture("odd", "model.cact"));
  const CactFile base = FromBytes(clean);
  std::vector<Plant> plants;
  // FP16 elements at every lane of a word, and the last one.
  const TensorEntry* fp16 = nullptr;
  for (const TensorEntry& t : base.tensors())
    if (HoldsValues(t) && t.record.NumElements() > 8) fp16 = &t;
  ASSERT_NE(fp16, nullptr);
  const uint64_t n = fp16->record.NumElements();
  for (uint64_t i : {uint64_t{0}, uint64_t{1}, uint64_t{2}, uint64_t{3}, uint64_t{5}, n - 1})
    plants.push_back({fp16->name, false, i, 0x7E00, "NaN"});
  plants.push_back({fp16->name, false, 4, 0xFC00, "-Inf"});
  // CQ group norms: the last group, and others.
  const TensorEntry* cq = nullptr;
  for (const TensorEntry& t : base.tensors())
    if (t.is_cq()) cq = &t;
  ASSERT_NE(cq, nullptr);
  // A blob whose value count is not a multiple of four exercises the tail after the words.
  for (const TensorEntry& t : base.tensors())
    if (HoldsValues(t) && t.record.NumElements() % 4 != 0)
      plants.push_back({t.name, false, t.record.NumElements() - 1, 0x7C01, "NaN"});
  for (uint64_t from_end : {uint64_t{0}, uint64_t{1}, uint64_t{6}})
    plants.push_back({cq->name, true, from_end, 0x7C00, "+Inf"});

  for (const Plant& p : plants) {
    std::vector<uint8_t> bytes = clean;
    const TensorEntry& t = *base.Find(p.tensor);
    const uint64_t groups =
        t.is_cq() ? t.rows() * ((t.cols() + t.record.group - 1) / t.record.group) : 0;
    const uint64_t index = p.norm ? groups - 1 - p.index : p.index;
    const uint64_t byte = p.norm ? t.record.offset + t.record.nbytes - 2 * (p.index + 1)
                                 : t.record.offset + 2 * p.index;
    std::memcpy(&bytes[byte], &p.half, 2);
    const CactFile f = FromBytes(bytes);
    uint64_t total = 0;
    const std::vector<NonFiniteValue> found = FindNonFinite(f, 10, &total);
    ASSERT_EQ(found.size(), 1u) << p.tensor << " " << p.index;
    EXPECT_EQ(total, 1u);
    EXPECT_EQ(found[0].record, int64_t(t.index));
    EXPECT_EQ(found[0].tensor, p.tensor);
    EXPECT_EQ(found[0].group_norm, p.norm);
    EXPECT_EQ(found[0].index, index);
    EXPECT_EQ(found[0].byte_offset, byte);
    EXPECT_EQ(found[0].value, p.name);
    const absl::Status st = CheckFinite(f);
    EXPECT_FALSE(st.ok());
    EXPECT_NE(st.message().find(found[0].Describe()), std::string::npos) << st;
  }
}

TEST(FiniteCheck, CountsBeyondTheLimitAndTheCodebookIsRefusedAtOpen) {
  const std::vector<uint8_t> clean = ReadAll(Fixture("tiny", "model.cact"));
  const CactFile base = FromBytes(clean);
  std::vector<uint8_t> bytes = clean;
  uint64_t planted = 0;
  for (const TensorEntry& t : base.tensors())
    if (HoldsValues(t) && planted < 3) {
      const uint16_t nan = 0x7FFF;
      std::memcpy(&bytes[t.record.offset], &nan, 2);
      ++planted;
    }
  ASSERT_EQ(planted, 3u);
  uint64_t total = 0;
  EXPECT_EQ(FindNonFinite(FromBytes(bytes), 1, &total).size(), 1u);
  EXPECT_EQ(total, 3u);
  EXPECT_NE(CheckFinite(FromBytes(bytes)).message().find("(3 non-finite values;"),
            std::string::npos);
  // The header codebook is checked when the file is opened.
  bytes = clean;
  const float nan = std::nanf("");
  std::memcpy(&bytes[kHeaderBytes + 4 * 3], &nan, 4);
  absl::StatusOr<CactFile> f = CactFile::FromBytes(FileBytes::FromBuffer("m.cact", bytes));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("codebook[3]"), std::string::npos) << f.status();
}

}  // namespace
}  // namespace cact
