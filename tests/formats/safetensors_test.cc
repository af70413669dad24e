// safetensors: the fixtures' weights read with names/shapes of the .cact directory; write ->
// read round trips; hostile headers give specific errors.
#include "formats/safetensors.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstring>

#include "formats/cact/cact_file.h"
#include "lib/float16.h"
#include "nlohmann/json.hpp"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::TempDir;

class SafetensorsFixtureTest : public ::testing::TestWithParam<std::string> {};

TEST_P(SafetensorsFixtureTest, ReadsWeightsWithDirectoryNamesAndShapes) {
  auto st = ReadSafetensors(Fixture(GetParam(), "weights.safetensors"));
  ASSERT_TRUE(st.ok()) << st.status();
  auto f = CactFile::Open(Fixture(GetParam(), "model.cact"));
  ASSERT_TRUE(f.ok()) << f.status();
  ASSERT_EQ(st->tensors.size() + 1, f->tensors().size());
  for (size_t i = 0; i < st->tensors.size(); ++i) {
    const FloatTensor& t = st->tensors[i];
    const TensorEntry& e = f->tensors()[i];
    EXPECT_EQ(t.name, e.name);
    EXPECT_EQ(t.shape, e.shape()) << t.name;
    EXPECT_EQ(t.stored_dtype, "F32");
    EXPECT_EQ(t.data.size(), e.record.NumElements()) << t.name;
  }
  for (const char* key : {"config", "bits_map", "seed", "group"})
    EXPECT_TRUE(st->metadata.count(key)) << key;
  EXPECT_EQ(st->metadata.at("group"), "128");
  const nlohmann::json cfg = nlohmann::json::parse(st->metadata.at("config"));
  EXPECT_EQ(cfg["d_model"].get<uint32_t>(), f->geometry().d_model);
  // FP16 records are the exporter's round-to-nearest-even of these floats.
  for (const TensorEntry& e : f->tensors()) {
    if (e.record.dtype != DType::kFP16) continue;
    const FloatTensor* t = st->Find(e.name);
    ASSERT_NE(t, nullptr) << e.name;
    auto blob = f->blob(e);
    for (size_t k = 0; k < t->data.size(); ++k) {
      const uint16_t stored = uint16_t(blob[2 * k] | (blob[2 * k + 1] << 8));
      ASSERT_EQ(FloatToHalfBits(t->data[k]), stored) << e.name << "[" << k << "]";
    }
  }
}

TEST_P(SafetensorsFixtureTest, WriteReadRoundTrip) {
  auto st = ReadSafetensors(Fixture(GetParam(), "weights.safetensors"));
  ASSERT_TRUE(st.ok()) << st.status();
  TempDir dir;
  for (const std::string dtype : {"F32", "F16", "BF16"}) {
    const std::string path = dir / ("w_" + dtype + ".safetensors");
    ASSERT_TRUE(WriteSafetensors(path, *st, dtype).ok());
    auto back = ReadSafetensors(path);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->metadata, st->metadata);
    ASSERT_EQ(back->tensors.size(), st->tensors.size());
    for (size_t i = 0; i < st->tensors.size(); ++i) {
      const FloatTensor &a = st->tensors[i], &b = back->tensors[i];
      EXPECT_EQ(a.name, b.name);
      EXPECT_EQ(a.shape, b.shape);
      EXPECT_EQ(b.stored_dtype, dtype);
      ASSERT_EQ(a.data.size(), b.data.size());
      for (size_t k = 0; k < a.data.size(); ++k) {
        // F32 is exact; F16/BF16 must equal the round-to-nearest-even conversion.
        const float want = dtype == "F32"   ? a.data[k]
                           : dtype == "F16" ? HalfBitsToFloat(FloatToHalfBits(a.data[k]))
                                            : Bf16BitsToFloat(FloatToBf16Bits(a.data[k]));
        ASSERT_EQ(std::memcmp(&want, &b.data[k], 4), 0) << a.name << "[" << k << "] " << dtype;
      }
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, SafetensorsFixtureTest, ::testing::Values("tiny", "odd"));

std::vector<uint8_t> WithHeader(const std::string& json, size_t data_bytes) {
  std::vector<uint8_t> out(8 + json.size() + data_bytes, 0);
  uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) out[i] = uint8_t(n >> (8 * i));
  std::memcpy(out.data() + 8, json.data(), json.size());
  return out;
}

TEST(SafetensorsErrors, HeaderLengthAboveLimitRejectedBeforeAllocating) {
  std::vector<uint8_t> b(16, 0);
  const uint64_t n = kMaxSafetensorsHeader + 1;
  for (int i = 0; i < 8; ++i) b[i] = uint8_t(n >> (8 * i));
  auto st = ParseSafetensors(b, "w.safetensors");
  ASSERT_FALSE(st.ok());
  // The file size bounds the length first: a file of another kind is told apart.
  EXPECT_EQ(st.status().message(),
            "w.safetensors: header length at offset 0: 104857601 bytes but only 8 follow the "
            "prefix (file size 16): not a safetensors file, or a truncated one");
}

TEST(SafetensorsErrors, HeaderLengthPastEnd) {
  auto b = WithHeader("{}", 0);
  b[0] = 50;
  auto st = ParseSafetensors(b, "w.safetensors");
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.status().message().find("header length at offset 0: 50 bytes but only 2 follow"),
            std::string::npos)
      << st.status();
}

TEST(SafetensorsErrors, OverlappingData) {
  const std::string json =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},"b":{"dtype":"F32","shape":[2],"data_offsets":[4,12]}})";
  auto st = ParseSafetensors(WithHeader(json, 12), "w.safetensors");
  ASSERT_FALSE(st.ok());
  const uint64_t data_start = 8 + json.size();
  EXPECT_EQ(st.status().message(), "w.safetensors: tensor 'b' data_offsets at offset " +
                                       std::to_string(data_start + 4) +
                                       ": [4, 12) overlaps 'a' [0, 8)");
}

TEST(SafetensorsErrors, SizeMismatchOutOfBoundsAndBadDtype) {
  auto mismatch = ParseSafetensors(
      WithHeader(R"({"a":{"dtype":"F16","shape":[3],"data_offsets":[0,8]}})", 8), "w");
  ASSERT_FALSE(mismatch.ok());
  EXPECT_NE(mismatch.status().message().find("8 bytes but F16 x 3 elements needs 6"),
            std::string::npos)
      << mismatch.status();
  auto past = ParseSafetensors(
      WithHeader(R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]}})", 8), "w");
  ASSERT_FALSE(past.ok());
  EXPECT_NE(past.status().message().find("[0, 16) is not inside the 8 data bytes"),
            std::string::npos)
      << past.status();
  auto dtype = ParseSafetensors(
      WithHeader(R"({"a":{"dtype":"I64","shape":[1],"data_offsets":[0,8]}})", 8), "w");
  ASSERT_FALSE(dtype.ok());
  EXPECT_NE(dtype.status().message().find("'I64' is not supported"), std::string::npos)
      << dtype.status();
  auto overflow = ParseSafetensors(
      WithHeader(
          R"({"a":{"dtype":"F32","shape":[4294967295,4294967295,4294967295],"data_offsets":[0,8]}})",
          8),
      "w");
  ASSERT_FALSE(overflow.ok());
  EXPECT_NE(overflow.status().message().find("overflows"), std::string::npos) << overflow.status();
  auto json = ParseSafetensors(WithHeader("{not json", 0), "w");
  ASSERT_FALSE(json.ok());
  EXPECT_NE(json.status().message().find("header JSON at offset 8"), std::string::npos)
      << json.status();
}

TEST(Float16, KnownConversions) {
  // Round to nearest even, subnormals, overflow, as numpy's astype(float16).
  EXPECT_EQ(FloatToHalfBits(1.0f), 0x3C00);
  EXPECT_EQ(FloatToHalfBits(-2.0f), 0xC000);
  EXPECT_EQ(FloatToHalfBits(65504.0f), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(65520.0f), 0x7C00);  // halfway to 65536 rounds to even: inf
  EXPECT_EQ(FloatToHalfBits(65519.99f), 0x7BFF);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -24)), 0x0001);  // smallest subnormal
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.0f, -25)), 0x0000);  // tie to even: zero
  EXPECT_EQ(FloatToHalfBits(std::ldexp(1.5f, -25)), 0x0001);
  EXPECT_EQ(FloatToHalfBits(std::ldexp(3.0f, -25)), 0x0002);         // 1.5 units -> 2 (even)
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(1.0f, -11)), 0x3C00);  // tie -> even
  EXPECT_EQ(FloatToHalfBits(1.0f + std::ldexp(3.0f, -11)), 0x3C02);
  EXPECT_EQ(FloatToHalfBits(INFINITY), 0x7C00);
  EXPECT_TRUE(std::isnan(HalfBitsToFloat(FloatToHalfBits(NAN))));
  EXPECT_EQ(HalfBitsToFloat(0x0001), std::ldexp(1.0f, -24));
  EXPECT_EQ(HalfBitsToFloat(0x03FF), std::ldexp(1023.0f, -24));
  EXPECT_EQ(FloatToBf16Bits(1.0f), 0x3F80);
  EXPECT_EQ(FloatToBf16Bits(1.0f + std::ldexp(1.0f, -8)), 0x3F80);  // tie -> even
  EXPECT_EQ(FloatToBf16Bits(1.0f + std::ldexp(3.0f, -8)), 0x3F82);
  // Every half value round-trips exactly through float.
  for (uint32_t h = 0; h < 0x10000; ++h) {
    if ((h & 0x7C00) == 0x7C00 && (h & 0x3FF)) continue;  // NaNs
    ASSERT_EQ(FloatToHalfBits(HalfBitsToFloat(uint16_t(h))), h) << h;
  }
}

TEST(Float16, MatchesNumpyOnRandomFloats) {
  // Independent oracle: numpy's astype(float16) on the same bit patterns.
  TempDir dir;
  std::vector<uint32_t> bits;
  uint64_t s = 12345;
  for (int i = 0; i < 20000; ++i) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    uint32_t u = uint32_t(s >> 32);
    // Concentrate on the half range and its edges (exponents 100..150).
    u = (u & 0x807FFFFF) | (uint32_t(100 + (s >> 20) % 51) << 23);
    bits.push_back(u);
  }
  testing::WriteAll(dir / "in.bin", std::vector<uint8_t>(
                                        reinterpret_cast<uint8_t*>(bits.data()),
                                        reinterpret_cast<uint8_t*>(bits.data()) + 4 * bits.size()));
  auto r = testing::Run(testing::Python() + " -c \"import numpy as np; a=np.fromfile('" +
                        dir / "in.bin" + "', dtype='<f4'); a.astype(np.float16).tofile('" +
                        dir / "out.bin" + "')\"");
  ASSERT_EQ(r.exit_code, 0) << r.output;
  const std::vector<uint8_t> out = testing::ReadAll(dir / "out.bin");
  ASSERT_EQ(out.size(), 2 * bits.size());
  for (size_t i = 0; i < bits.size(); ++i) {
    float f;
    std::memcpy(&f, &bits[i], 4);
    ASSERT_EQ(FloatToHalfBits(f), uint16_t(out[2 * i] | (out[2 * i + 1] << 8)))
        << std::hex << bits[i];
  }
}

}  // namespace
}  // namespace cact
