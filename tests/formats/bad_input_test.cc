// Corrupt .cact files: each gives its specific error (file, field, byte offset, what), and
// none crashes or reads outside the buffer (run under -DCACT_SANITIZE=ON to check the latter).
#include <gtest/gtest.h>

#include <cstring>
#include <map>

#include "absl/strings/str_format.h"

#include "formats/cact/cact_file.h"
#include "formats/le_bytes.h"
#include "lib/file_bytes.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::ReadAll;

class BadInputTest : public ::testing::Test {
 protected:
  void SetUp() override {
    good_ = ReadAll(Fixture("tiny", "model.cact"));
    ASSERT_FALSE(good_.empty());
    auto f = CactFile::Open(Fixture("tiny", "model.cact"));
    ASSERT_TRUE(f.ok()) << f.status();
    for (const TensorEntry& t : f->tensors()) {
      index_[t.name] = t.index;
      records_.push_back(t.record);
    }
  }
  static uint64_t RecordPos(uint32_t i) { return kHeaderBytes + 4 * 28 + kRecordBytes * i; }
  // Parses `bytes` as "model.cact" and returns the error message ("" when it opens).
  static std::string Error(std::vector<uint8_t> bytes) {
    auto f = CactFile::FromBytes(FileBytes::FromBuffer("model.cact", std::move(bytes)));
    return f.ok() ? "" : std::string(f.status().message());
  }
  std::vector<uint8_t> Truncated(size_t n) const {
    return std::vector<uint8_t>(good_.begin(), good_.begin() + n);
  }
  std::vector<uint8_t> good_;
  std::map<std::string, uint32_t> index_;
  std::vector<TensorRecord> records_;
};

TEST_F(BadInputTest, GoodFileOpens) { EXPECT_EQ(Error(good_), ""); }

TEST_F(BadInputTest, TruncatedInsideHeader) {
  for (size_t n : {0, 3, 4, 60, 119})
    EXPECT_EQ(Error(Truncated(n)),
              absl::StrFormat(
                  "model.cact: header at offset 0: file has %d bytes, the header needs 120", n));
}

TEST_F(BadInputTest, TruncatedInsideCodebook) {
  for (size_t n : {120, 121, 200, 231})
    EXPECT_EQ(Error(Truncated(n)),
              absl::StrFormat("model.cact: codebook at offset 120: file has %d bytes, the 28 "
                              "codebook values end at 232",
                              n));
}

TEST_F(BadInputTest, TruncatedInsideDirectory) {
  const size_t end = RecordPos(76);
  for (size_t n : {size_t(232), size_t(232 + 44), size_t(232 + 44 * 40 + 7), end - 1})
    EXPECT_EQ(Error(Truncated(n)),
              absl::StrFormat("model.cact: directory at offset 232: file has %d bytes, the 76 "
                              "records of 44 bytes end at %d",
                              n, end));
}

TEST_F(BadInputTest, TruncatedInsideOrBetweenEveryBlob) {
  // Cut at the end of the directory, in the padding, at every blob's start, middle and
  // last byte: the error names the record whose blob no longer fits.
  for (uint32_t i = 0; i < records_.size(); ++i) {
    const TensorRecord& r = records_[i];
    for (uint64_t cut : {r.offset, r.offset + r.nbytes / 2, r.offset + r.nbytes - 1}) {
      if (i == 0 && cut == r.offset) cut = RecordPos(76);  // right after the directory
      const std::string err = Error(Truncated(cut));
      const std::string want = absl::StrFormat("record %d (", i);
      EXPECT_NE(err.find(want), std::string::npos) << "cut " << cut << ": " << err;
      EXPECT_NE(err.find(absl::StrFormat("offset at offset %d: blob [%d, +%d) extends past the end "
                                         "of the file (%d bytes)",
                                         RecordPos(i) + 20, r.offset, r.nbytes, cut)),
                std::string::npos)
          << err;
    }
  }
}

TEST_F(BadInputTest, EveryTruncationFails) {
  // Stride through all lengths (every 61st byte plus the last few): never opens, never crashes.
  for (size_t n = 0; n < good_.size(); n += (n + 8 > good_.size() ? 1 : 61))
    ASSERT_NE(Error(Truncated(n)), "") << n;
}

TEST_F(BadInputTest, BadTag) {
  good_[0] ^= 1;
  EXPECT_EQ(Error(good_),
            "model.cact: header.tag at offset 0: 0x05E12A82 is not the .cact tag "
            "0x05E12A83 (not a .cact file)");
}

TEST_F(BadInputTest, HeaderConsistency) {
  struct Case {
    int field;
    uint32_t value;
    std::string want;
  };
  const std::vector<Case> cases = {
      {4, 5, "header.kv_bits at offset 16: 5 is not one of 2, 3, 4, 8"},
      {12, 256,
       "header.hada_n at offset 48: 256 but the smallest power of two >= d_model 128 is 128"},
      {15, 32,
       "header.num_engram_tables at offset 64: 2 tables x engram_sub_dim 32 = 64, not d_model 128"},
      {19, 5, "header.num_engram_orders at offset 76: 5 is outside the allowed range [1, 4]"},
      {18, 4, "header.engram_conv_dilation at offset 72: 4 but the largest engram order is 3"},
      {26, 4, "header.engram_sites[1] at offset 104: site 1 at layer 4 but num_layers is 4"},
      {26, 1,
       "header.engram_sites[1] at offset 104: site 1 at layer 1 is not after site 0 at layer 1"},
      {2, 27, "header.codebook_len at offset 8: 27 but the CQ2|CQ3|CQ4 codebooks need 4+8+16 = 28"},
      {8, 3, "header.num_kv_heads at offset 32: 3 does not divide num_heads 4"},
      {1, 77,
       "header.num_tensors at offset 4: 77 but the geometry implies 76 (no probe heads) or "
       "77 + 3*H (H >= 1 probe heads)"},
  };
  for (const Case& c : cases) {
    std::vector<uint8_t> b = good_;
    StoreLE32(b.data() + 4 * c.field, c.value);
    EXPECT_EQ(Error(b), "model.cact: " + c.want);
  }
}

TEST_F(BadInputTest, CodebookNotFiniteOrNotSorted) {
  std::vector<uint8_t> b = good_;
  StoreLEF32(b.data() + 120 + 4 * 5, std::nanf(""));
  EXPECT_EQ(Error(b), "model.cact: codebook[5] at offset 140: nan is not finite");
  b = good_;
  StoreLEF32(b.data() + 120 + 4 * 2, -1.0f);
  EXPECT_NE(Error(b).find("codebook[2] at offset 128: -1 is not above the previous value"),
            std::string::npos);
}

TEST_F(BadInputTest, OverlappingOffsets) {
  const uint32_t q = index_.at("layer00.q_proj"), norm = index_.at("layer00.norm_in");
  StoreLE64(good_.data() + RecordPos(q) + 20, records_[norm].offset);
  const TensorRecord& a = records_[norm];
  EXPECT_EQ(
      Error(good_),
      absl::StrFormat("model.cact: record %d (layer00.q_proj) offset at offset %d: blob [%d, %d) "
                      "overlaps record %d (layer00.norm_in) [%d, %d)",
                      q, RecordPos(q) + 20, a.offset, a.offset + records_[q].nbytes, norm, a.offset,
                      a.offset + a.nbytes));
}

TEST_F(BadInputTest, MisalignedOffset) {
  const uint32_t q = index_.at("layer00.q_proj");
  StoreLE64(good_.data() + RecordPos(q) + 20, records_[q].offset + 8);
  EXPECT_EQ(Error(good_),
            absl::StrFormat("model.cact: record %d (layer00.q_proj) offset at offset %d: "
                            "%d is not a multiple of 64",
                            q, RecordPos(q) + 20, records_[q].offset + 8));
}

TEST_F(BadInputTest, OffsetInsideDirectory) {
  StoreLE64(good_.data() + RecordPos(1) + 20, 128);
  EXPECT_EQ(Error(good_),
            absl::StrFormat("model.cact: record 1 (layer00.norm_in) offset at offset %d: "
                            "128 lies before the first blob offset 3584 (inside the "
                            "header, codebook or directory)",
                            RecordPos(1) + 20));
}

TEST_F(BadInputTest, OffsetPastEnd) {
  StoreLE64(good_.data() + RecordPos(5) + 20, 1ull << 40);
  EXPECT_EQ(Error(good_),
            absl::StrFormat("model.cact: record 5 (layer00.q_norm) offset at offset %d: "
                            "blob [1099511627776, +64) extends past the end of the "
                            "file (200225 bytes)",
                            RecordPos(5) + 20));
  // offset + nbytes wraps around 2^64: still "past the end", not a wrapped small value.
  StoreLE64(good_.data() + RecordPos(5) + 20, ~uint64_t{63});
  EXPECT_NE(Error(good_).find("extends past the end"), std::string::npos);
}

TEST_F(BadInputTest, LyingNbytes) {
  const uint32_t q = index_.at("layer00.q_proj");
  StoreLE64(good_.data() + RecordPos(q) + 28, 9999);
  EXPECT_EQ(Error(good_),
            absl::StrFormat("model.cact: record %d (layer00.q_proj) nbytes at offset %d: "
                            "9999 but CQ2 g128 [128,128] needs 4352",
                            q, RecordPos(q) + 28));
  good_ = ReadAll(Fixture("tiny", "model.cact"));
  StoreLE64(good_.data() + RecordPos(1) + 28, 258);
  EXPECT_EQ(Error(good_),
            absl::StrFormat("model.cact: record 1 (layer00.norm_in) nbytes at offset %d: "
                            "258 but FP16 [128] needs 256",
                            RecordPos(1) + 28));
}

TEST_F(BadInputTest, HugeShapeOverflows) {
  const uint32_t b = index_.at("mhc_b_res");
  for (int k = 0; k < 3; ++k) StoreLE32(good_.data() + RecordPos(b) + 4 + 4 * k, 0xFFFFFFFFu);
  EXPECT_EQ(Error(good_),
            absl::StrFormat("model.cact: record %d (mhc_b_res) shape at offset %d: FP16 "
                            "[4294967295,4294967295,4294967295]: the byte count "
                            "overflows 64 bits",
                            b, RecordPos(b) + 4));
}

TEST_F(BadInputTest, ShapeDisagreesWithGeometry) {
  const uint32_t q = index_.at("layer00.q_proj");
  // [64, 256] has the same CQ2 byte count as [128, 128]? No: make nbytes consistent too.
  StoreLE32(good_.data() + RecordPos(q) + 4, 64);
  StoreLE64(good_.data() + RecordPos(q) + 28, CqBlobBytes(64, 128, 128, 2));
  EXPECT_EQ(Error(good_),
            absl::StrFormat("model.cact: record %d (layer00.q_proj) shape at offset %d: "
                            "[64,128] but the geometry makes layer00.q_proj [128,128]",
                            q, RecordPos(q) + 4));
}

TEST_F(BadInputTest, BadGroupAndBits) {
  const uint32_t q = index_.at("layer00.q_proj");
  std::vector<uint8_t> b = good_;
  StoreLE32(b.data() + RecordPos(q) + 36, 96);
  EXPECT_EQ(Error(b),
            absl::StrFormat("model.cact: record %d (layer00.q_proj) group at offset %d: 96 "
                            "is not a power of two in [8, 65536]",
                            q, RecordPos(q) + 36));
  b = good_;
  StoreLE32(b.data() + RecordPos(q) + 40, 6);
  EXPECT_EQ(Error(b),
            absl::StrFormat("model.cact: record %d (layer00.q_proj) bits at offset %d: 6 is "
                            "not a CQ width (2, 3, 4 or 5 = ternary)",
                            q, RecordPos(q) + 40));
  b = good_;
  b[RecordPos(1)] = 9;
  EXPECT_EQ(Error(b),
            absl::StrFormat("model.cact: record 1 (layer00.norm_in) dtype at offset %d: 9 is "
                            "not a dtype (1 FP16, 2 FP32, 3 CQ, 4 RAW)",
                            RecordPos(1)));
}

TEST_F(BadInputTest, NonRawLastRecordAndRawInTheMiddle) {
  std::vector<uint8_t> b = good_;
  b[RecordPos(75)] = uint8_t(DType::kFP16);
  EXPECT_EQ(Error(b),
            absl::StrFormat("model.cact: record 75 (tokenizer) dtype at offset %d: FP16 but "
                            "the last record (tokenizer) must be RAW",
                            RecordPos(75)));
  b = good_;
  b[RecordPos(1)] = uint8_t(DType::kRAW);
  EXPECT_EQ(Error(b),
            absl::StrFormat("model.cact: record 1 (layer00.norm_in) dtype at offset %d: RAW "
                            "but only the last record (tokenizer) may be RAW",
                            RecordPos(1)));
}

TEST_F(BadInputTest, TrailingBytes) {
  good_.resize(good_.size() + 3, 0);
  EXPECT_EQ(Error(good_),
            "model.cact: end of file at offset 200225: 3 bytes follow the last blob "
            "(the file must end there)");
}

TEST_F(BadInputTest, LyingTokenizerPieceLength) {
  const uint64_t tok = records_.back().offset;
  // Piece 0 starts right after the 24-byte blob header; its u16 length is at +5.
  StoreLE16(good_.data() + tok + 24 + 5, 60000);
  EXPECT_EQ(Error(good_),
            absl::StrFormat("model.cact: tokenizer piece 0 length at offset %d: 60000 bytes "
                            "but only %d remain in the blob",
                            tok + 24 + 5, records_.back().nbytes - 24 - 7));
  good_ = ReadAll(Fixture("tiny", "model.cact"));
  StoreLE32(good_.data() + tok, 1u << 30);  // n_pieces
  EXPECT_NE(Error(good_).find(absl::StrFormat("tokenizer n_pieces at offset %d: 1073741824 pieces "
                                              "need at least",
                                              tok)),
            std::string::npos);
  good_ = ReadAll(Fixture("tiny", "model.cact"));
  good_[tok + 24 + 4] = 7;  // piece 0 type
  EXPECT_EQ(Error(good_),
            absl::StrFormat("model.cact: tokenizer piece 0 type at offset %d: 7 is not a "
                            "piece type (0 normal .. 4 byte)",
                            tok + 28));
}

TEST_F(BadInputTest, RandomCorruptionNeverCrashes) {
  // Random byte changes in the header, codebook, directory and tokenizer blob: every
  // outcome is an error or a file whose blobs all lie inside the buffer. Deterministic LCG.
  const uint64_t dir_end = RecordPos(76), tok = records_.back().offset;
  uint64_t s = 42;
  auto next = [&] { return (s = s * 6364136223846793005ull + 1442695040888963407ull) >> 33; };
  size_t errors = 0;
  for (int iter = 0; iter < 3000; ++iter) {
    std::vector<uint8_t> b = good_;
    for (int k = 0, n = 1 + int(next() % 3); k < n; ++k) {
      const bool in_tok = next() % 4 == 0;
      const uint64_t pos = in_tok ? tok + next() % (b.size() - tok) : next() % dir_end;
      b[pos] = uint8_t(next());
    }
    auto f = CactFile::FromBytes(FileBytes::FromBuffer("model.cact", std::move(b)));
    if (!f.ok()) {
      ++errors;
      EXPECT_EQ(f.status().message().rfind("model.cact: ", 0), 0u) << f.status();
      continue;
    }
    for (const TensorEntry& t : f->tensors())
      ASSERT_LE(t.record.offset + t.record.nbytes, f->bytes().size()) << t.name;
  }
  EXPECT_GT(errors, 1000u);  // most random changes must be caught
}

TEST(BadProbeHeads, ManifestCodeMustBeAHead) {
  std::vector<uint8_t> b = ReadAll(Fixture("odd", "model.cact"));
  auto f = CactFile::Open(Fixture("odd", "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  const TensorEntry* m = f->Find("heads.manifest");
  ASSERT_NE(m, nullptr);
  StoreLE16(b.data() + m->record.offset + 2, 0x4200);  // 3.0
  auto bad = CactFile::FromBytes(FileBytes::FromBuffer("odd.cact", b));
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(
      bad.status().message(),
      absl::StrFormat("odd.cact: record %d (heads.manifest) value 1 at offset %d: not a probe "
                      "head code (1 contrastive, 2 confidence)",
                      m->index, m->record.offset + 2));
  StoreLE16(b.data() + m->record.offset + 2, 0x3C00);  // contrastive twice
  bad = CactFile::FromBytes(FileBytes::FromBuffer("odd.cact", b));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("contrastive_head appears twice"), std::string::npos);
}

TEST(BadProbeHeads, HeadOutputSizeComesFromTheFile) {
  // odd's contrastive head projects to 32 (not the released 128): read from the records.
  auto f = CactFile::Open(Fixture("odd", "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  const TensorEntry* proj = f->Find("contrastive_head.proj");
  ASSERT_NE(proj, nullptr);
  EXPECT_EQ(proj->shape(), (std::vector<uint32_t>{32, 4 * 96}));
  EXPECT_EQ(f->Find("contrastive_head.bias")->shape(), std::vector<uint32_t>{32});
  EXPECT_EQ(f->Find("confidence_head.proj")->shape(), (std::vector<uint32_t>{1, 8 * 96}));
}

}  // namespace
}  // namespace cact
