// Corrupt generation-3 files: every header field out of range, wrong counts, records that
// disagree with the geometry, bad heads, permutations and tokenizers. Each error is one line
// naming the file, the field and its byte offset.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>

#include "absl/strings/str_format.h"
#include "formats/cact/cact3_file.h"
#include "formats/le_bytes.h"
#include "lib/file_bytes.h"
#include "support/needle3_synthetic.h"

namespace cact {
namespace {

using testing::Head3;

bool StartsWith(const std::string& s, const std::string& prefix) {
  return s.compare(0, prefix.size(), prefix) == 0;
}

class Needle3BadInput : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::Synth3Options o;
    o.geometry = SmallGeometry3();
    o.layout.heads = {Head3(ProbeHead3::kConfidence, 2, 2, 1), Head3(ProbeHead3::kRouter, 2, 2, 3)};
    o.group = 32;
    good_ = testing::SynthesizeCact3(o);
    auto f = Cact3File::FromBytes(FileBytes::FromBuffer("m.cact", good_));
    ASSERT_TRUE(f.ok()) << f.status();
    for (const TensorEntry& t : f->tensors()) index_[t.name] = t.index;
    records_.clear();
    for (const TensorEntry& t : f->tensors()) records_.push_back(t.record);
  }
  static std::string Error(std::vector<uint8_t> bytes) {
    auto f = Cact3File::FromBytes(FileBytes::FromBuffer("m.cact", std::move(bytes)));
    return f.ok() ? "" : std::string(f.status().message());
  }
  // The message with header word `index` set to `v`.
  std::string WordError(int index, uint32_t v) const {
    std::vector<uint8_t> b = good_;
    StoreLE32(b.data() + 4 * index, v);
    return Error(b);
  }
  static uint64_t RecordPos(uint32_t i) { return 196 + 4 * 28 + 44 * uint64_t(i); }
  std::vector<uint8_t> WithRecord(uint32_t i, const TensorRecord& r) const {
    std::vector<uint8_t> b = good_;
    const auto bytes = SerializeRecord(r);
    std::copy(bytes.begin(), bytes.end(), b.begin() + RecordPos(i));
    return b;
  }
  std::vector<uint8_t> good_;
  std::map<std::string, uint32_t> index_;
  std::vector<TensorRecord> records_;
};

TEST_F(Needle3BadInput, GoodFileOpens) { EXPECT_EQ(Error(good_), ""); }

// Header word index, bad value, and the start of the message after "m.cact: ".
struct FieldCase {
  int index;
  uint32_t value;
  std::string field, what;
};

TEST_F(Needle3BadInput, EveryHeaderFieldOutOfRange) {
  // The small geometry: vocab 64, d_model 64, 4/2 heads, 3 layers, qk 16, v 8, hada 64, 2
  // lanes, taps 3, 2 tables x 16 slots x 32, orders 2,3, sites 0,2.
  const std::vector<FieldCase> cases = {
      {0, 0x05E12A85, "tag", "0x05E12A85 is not the Needle 3 tag 0x05E12A84"},
      {1, 7, "num_tensors", "7 but the geometry implies"},
      {2, 27, "codebook_len", "27 but the CQ2|CQ3|CQ4 codebooks need 4+8+16 = 28"},
      {4, 5, "kv_bits", "5 is not one of 2, 3, 4, 8"},
      {5, 0, "vocab", "0 is outside the allowed range [1, 16777216]"},
      {6, 65, "out_vocab", "65 is outside the allowed range [0, 64]"},
      {7, 0, "d_model", "0 is outside the allowed range [1, 65536]"},
      {8, 0, "num_heads", "0 is outside the allowed range [1, 4096]"},
      {9, 3, "num_kv_heads", "3 does not divide num_heads 4"},
      {10, 0, "num_layers", "0 is outside the allowed range [1, 64]"},
      {10, 65, "num_layers", "65 is outside the allowed range [1, 64]"},
      {11, 0, "qk_head_dim", "0 is outside the allowed range [2, 4096]"},
      {11, 15, "qk_head_dim", "15 is odd"},
      {12, 0, "v_head_dim", "0 is outside the allowed range [1, 4096]"},
      {13, 0, "max_seq_len", "0 is outside the allowed range [1, 16777216]"},
      {14, 32, "hada_n", "32 but the smallest power of two >= d_model 64 is 64"},
      {15, 0, "mhc_lanes", "0 is outside the allowed range [1, 64]"},
      {16, 1u << 25, "sliding_window", "33554432 is outside the allowed range [0, 16777216]"},
      {17, 1u << 3, "global_mask_lo", "bit 3 (layer 3) is set but num_layers is 3"},
      {18, 1u << 0, "global_mask_hi", "bit 32 (layer 32) is set but num_layers is 3"},
      {19, 65, "qkv_conv_taps", "65 is outside the allowed range [0, 64]"},
      {20, 0, "engram_slots", "0 is outside the allowed range [1, 16777216]"},
      {21, 31, "engram_sub_dim", "31 but d_model 64 / num_engram_tables 2 is 32"},
      {22, 0, "num_engram_tables", "0 is outside the allowed range [1, 4096]"},
      {23, 0, "engram_conv_taps", "0 is outside the allowed range [1, 64]"},
      {24, 2, "engram_conv_dilation", "2 but the largest engram order is 3"},
      {25, 5000, "engram_seed_heads", "5000 is neither 0 nor in [heads per order 1, 4096]"},
      {26, 0, "num_engram_orders", "0 is outside the allowed range [1, 4]"},
      {26, 5, "num_engram_orders", "5 is outside the allowed range [1, 4]"},
      {27, 0, "engram_orders[0]", "0 is outside the allowed range [1, 64]"},
      {29, 4, "engram_orders[2]", "4 beyond num_engram_orders 2 (must be 0)"},
      {31, 17, "num_engram_sites", "17 is outside the allowed range [0, 16]"},
      {33, 3, "engram_sites[1]", "site 1 at layer 3 but num_layers is 3"},
      {33, 0, "engram_sites[1]", "site 1 at layer 0 is not after site 0 at layer 0"},
      {47, 1, "engram_sites[15]", "1 beyond num_engram_sites 2 (must be 0)"},
  };
  for (const FieldCase& c : cases) {
    const std::string prefix =
        absl::StrFormat("m.cact: header.%s at offset %d: ", c.field, 4 * c.index);
    const std::string got = WordError(c.index, c.value);
    EXPECT_TRUE(StartsWith(got, prefix)) << got;
    EXPECT_NE(got.find(c.what), std::string::npos) << "want: " << c.what << "\ngot:  " << got;
    EXPECT_EQ(got.find('\n'), std::string::npos) << got;
  }
}

TEST_F(Needle3BadInput, TablesNotAMultipleOfTheOrders) {
  std::vector<uint8_t> b = good_;
  StoreLE32(b.data() + 4 * 22, 3);   // num_engram_tables
  StoreLE32(b.data() + 4 * 21, 21);  // engram_sub_dim = 64 / 3
  EXPECT_EQ(Error(b),
            "m.cact: header.num_engram_tables at offset 88: 3 is not num_engram_orders 2 x heads "
            "per order");
}

TEST_F(Needle3BadInput, RopeTheta) {
  for (float v : {0.0f, -1.0f, std::numeric_limits<float>::quiet_NaN(),
                  std::numeric_limits<float>::infinity()}) {
    std::vector<uint8_t> b = good_;
    StoreLEF32(b.data() + 192, v);
    const std::string got = Error(b);
    EXPECT_TRUE(StartsWith(got, "m.cact: header.rope_theta at offset 192: ")) << got;
  }
}

TEST_F(Needle3BadInput, Truncations) {
  for (size_t n : {0, 3, 100, 195})
    EXPECT_EQ(
        Error(std::vector<uint8_t>(good_.begin(), good_.begin() + n)),
        absl::StrFormat(
            "m.cact: header at offset 0: file has %d bytes, the Needle 3 header needs 196", n));
  EXPECT_EQ(Error(std::vector<uint8_t>(good_.begin(), good_.begin() + 250)),
            "m.cact: codebook at offset 196: file has 250 bytes, the 28 codebook values end at "
            "308");
  const std::string dir = Error(std::vector<uint8_t>(good_.begin(), good_.begin() + 400));
  EXPECT_TRUE(StartsWith(dir, "m.cact: directory at offset 308: ")) << dir;
  std::vector<uint8_t> longer = good_;
  longer.push_back(0);
  EXPECT_EQ(Error(longer), absl::StrFormat("m.cact: end of file at offset %d: 1 bytes follow the "
                                           "last blob (the file must end there)",
                                           good_.size()));
}

TEST_F(Needle3BadInput, RecordShapeThatDisagreesWithTheGeometry) {
  // layer00.norm_in [64] FP16 stored as [32] (nbytes consistent with its own shape).
  const uint32_t i = index_["layer00.norm_in"];
  TensorRecord r = records_[i];
  r.shape[0] = 32;
  r.nbytes = 64;
  EXPECT_EQ(Error(WithRecord(i, r)),
            absl::StrFormat("m.cact: record %d (layer00.norm_in) shape at offset %d: [32] but "
                            "the geometry makes layer00.norm_in [64]",
                            i, RecordPos(i) + 4));
  // layer01.v_proj [16, 64] CQ2 stored as [32, 64]: rows are num_kv_heads x v_head_dim.
  const uint32_t v = index_["layer01.v_proj"];
  r = records_[v];
  r.shape[0] = 32;
  r.nbytes = CqBlobBytes(32, 64, r.group, r.bits);
  EXPECT_EQ(Error(WithRecord(v, r)),
            absl::StrFormat("m.cact: record %d (layer01.v_proj) shape at offset %d: [32,64] but "
                            "the geometry makes layer01.v_proj [16,64]",
                            v, RecordPos(v) + 4));
  // A 3-D Monarch factor where layer 0 chose shared 2-D factors.
  const uint32_t w = index_["layer02.w1a"];
  r = records_[w];
  r.ndim = 3;
  r.shape = {8, 8, 8, 0};
  r.nbytes = 1024;
  EXPECT_EQ(Error(WithRecord(w, r)),
            absl::StrFormat("m.cact: record %d (layer02.w1a) ndim at offset %d: 3 but the "
                            "geometry makes layer02.w1a [8,8]",
                            w, RecordPos(w) + 1));
  // The records' own checks: nbytes, CQ on a vector, FP16 permutation.
  r = records_[v];
  r.nbytes += 1;
  EXPECT_NE(
      Error(WithRecord(v, r)).find("record " + std::to_string(v) + " (layer01.v_proj) nbytes"),
      std::string::npos);
  const uint32_t p = index_["hada_p1"];
  r = records_[p];
  r.dtype = DType::kFP16;
  r.nbytes /= 2;
  EXPECT_EQ(Error(WithRecord(p, r)),
            absl::StrFormat("m.cact: record %d (hada_p1) dtype at offset %d: FP16 but hada_p1 "
                            "is an FP32 permutation",
                            p, RecordPos(p)));
}

TEST_F(Needle3BadInput, PermutationValues) {
  const uint32_t p = index_["hada_p2"];
  const uint64_t at = records_[p].offset;
  std::vector<uint8_t> b = good_;
  const float first = LoadLEF32(b.data() + at);
  StoreLEF32(b.data() + at + 4, first);  // value 1 repeats value 0
  EXPECT_EQ(Error(b), absl::StrFormat("m.cact: record %d (hada_p2) value 1 at offset %d: %g is "
                                      "repeated (a permutation of 0 .. 63)",
                                      p, at + 4, first));
  b = good_;
  StoreLEF32(b.data() + at, 0.5f);
  EXPECT_EQ(Error(b), absl::StrFormat("m.cact: record %d (hada_p2) value 0 at offset %d: 0.5 is "
                                      "not an index (a permutation of 0 .. 63)",
                                      p, at));
}

TEST_F(Needle3BadInput, HeadsManifestAndCount) {
  const uint32_t m = index_["heads.manifest"];
  const uint64_t at = records_[m].offset;
  std::vector<uint8_t> b = good_;
  StoreLE16(b.data() + at, 0x4400);  // 4.0
  EXPECT_EQ(Error(b), absl::StrFormat("m.cact: record %d (heads.manifest) value 0 at offset %d: "
                                      "not a probe head code (1 embedding, 2 confidence, 3 "
                                      "router)",
                                      m, at));
  b = good_;
  StoreLE16(b.data() + at + 2, 0x4000);  // confidence twice
  EXPECT_NE(Error(b).find("value 1 at offset " + std::to_string(at + 2) + ": code 2 after code 2"),
            std::string::npos)
      << Error(b);
  // Claim one more record than the heads hold.
  b = good_;
  StoreLE32(b.data() + 4, uint32_t(records_.size() + 1));
  const std::string got = Error(b);
  EXPECT_TRUE(StartsWith(got, "m.cact: header.num_tensors at offset 4: ")) << got;
}

TEST_F(Needle3BadInput, TokenizerWithMorePiecesThanTheVocabulary) {
  testing::Synth3Options o;
  o.geometry = SmallGeometry3();
  o.group = 32;
  o.tokenizer_pieces = 65;  // vocab 64
  const std::vector<uint8_t> b = testing::SynthesizeCact3(o);
  auto f = Cact3File::FromBytes(FileBytes::FromBuffer("m.cact", b));
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find("(tokenizer) n_pieces at offset"), std::string::npos)
      << f.status();
  EXPECT_NE(f.status().message().find("65 pieces but header.vocab is 64"), std::string::npos);
  o.tokenizer_pieces = 40;  // fewer is fine (input-only code rows)
  EXPECT_TRUE(
      Cact3File::FromBytes(FileBytes::FromBuffer("m.cact", testing::SynthesizeCact3(o))).ok());
}

}  // namespace
}  // namespace cact
