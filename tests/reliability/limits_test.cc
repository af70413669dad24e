// Lying headers are rejected before anything is sized from them: huge tensor counts, shapes
// whose product overflows, offsets past the end, RAW blobs with lying lengths, tokenizer
// piece counts, safetensors headers over 100 MB, zstd frames claiming terabytes.
// Each case checks the error (field named, clean shape), the largest single allocation made
// while parsing (operator new probe) and, in a forked child, that parsing succeeds in being
// rejected under a small address-space limit (which also covers malloc inside zstd).
#include <gtest/gtest.h>

#include <functional>

#include "formats/cact/cact_file.h"
#include "formats/safetensors.h"
#include "formats/tokenizer_blob.h"
#include "lib/file_bytes.h"
#include "reliability/allocation_probe.h"
#include "reliability/reliability_util.h"
#include "support/test_support.h"

namespace cact {
namespace {

using reliability::AllocationProbe;
using reliability::ChildResult;
using reliability::RunInChildWithAddressSpaceLimit;
using testing::Fixture;
using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

// Parsing a ~200 KB input may allocate a copy of it and small tables; nothing near this.
constexpr size_t kMaxSingleAllocation = 4u << 20;
// Address space a child may add while parsing (a lying header would ask for gigabytes).
constexpr uint64_t kChildHeadroom = 256ull << 20;

constexpr uint64_t kDirectory = 120 + 4 * 28;  // codebook_len is 28 in every valid file
uint64_t RecordPos(uint32_t i) { return kDirectory + 44ull * i; }
constexpr uint64_t kRecShape = 4, kRecOffset = 20, kRecNbytes = 28;

void Put(std::vector<uint8_t>* b, uint64_t pos, uint64_t value, int width) {
  for (int k = 0; k < width; ++k) (*b)[pos + k] = uint8_t(value >> (8 * k));
}
uint64_t Get(const std::vector<uint8_t>& b, uint64_t pos, int width) {
  uint64_t v = 0;
  for (int k = 0; k < width; ++k) v |= uint64_t(b[pos + k]) << (8 * k);
  return v;
}

struct LyingCase {
  std::string name;
  std::function<void(std::vector<uint8_t>*)> lie;
  std::string field;  // expected in the error message
};

void PrintTo(const LyingCase& c, std::ostream* os) { *os << c.name; }

class LyingCactHeader : public ::testing::TestWithParam<LyingCase> {};

// Returns the rejection message ("" when the file was accepted).
std::string OpenRejected(const std::vector<uint8_t>& bytes) {
  auto f = CactFile::FromBytes(FileBytes::FromBuffer("lying.cact", bytes));
  return f.ok() ? "" : std::string(f.status().message());
}

TEST_P(LyingCactHeader, RejectedBeforeAllocating) {
  std::vector<uint8_t> bytes = ReadAll(Fixture("tiny", "model.cact"));
  ASSERT_EQ(Get(bytes, 4, 4), 76u) << "tiny fixture changed: cases below assume 76 records";
  GetParam().lie(&bytes);
  std::string msg;
  size_t max_request = 0;
  {
    AllocationProbe probe;
    msg = OpenRejected(bytes);
    max_request = probe.max_request();
  }
  ASSERT_NE(msg, "") << GetParam().name << " was accepted";
  EXPECT_EQ(reliability::CheckFormatErrorShape(msg, "lying.cact", bytes.size()), "");
  EXPECT_NE(msg.find(GetParam().field), std::string::npos) << msg;
  // The copy of the input itself is one allocation of bytes.size().
  EXPECT_LE(max_request, std::max(kMaxSingleAllocation, bytes.size())) << msg;
  ChildResult r = RunInChildWithAddressSpaceLimit(
      [&] { return OpenRejected(bytes).empty() ? 1 : 0; }, kChildHeadroom);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

const uint32_t kTok = 75;  // tiny: the tokenizer is record 75

INSTANTIATE_TEST_SUITE_P(
    Tiny, LyingCactHeader,
    ::testing::Values(
        LyingCase{"HugeTensorCount", [](auto* b) { Put(b, 4, 0xFFFFFFFFu, 4); }, "num_tensors"},
        // 77 = core + tokenizer; + 1 + 3*H is a count the geometry accepts (H heads), so the
        // error must come from the directory not fitting the file.
        LyingCase{"HugeConsistentTensorCount",
                  [](auto* b) { Put(b, 4, 76 + 1 + 3 * 1000000000u, 4); }, "directory"},
        LyingCase{"HugeVocab", [](auto* b) { Put(b, 20, 0xFFFFFFFFu, 4); }, "header.vocab"},
        LyingCase{"HugeLayers", [](auto* b) { Put(b, 36, 0x7FFFFFFFu, 4); }, "header.num_layers"},
        LyingCase{"HugeSlots", [](auto* b) { Put(b, 56, 0xFFFFFFF0u, 4); }, "header.engram_slots"},
        LyingCase{"HugeCodebookLen", [](auto* b) { Put(b, 8, 0xFFFFFFFFu, 4); }, "codebook_len"},
        // layer00.norm_in (FP16) as a 4-D tensor of 2^32-1 per dim: 2^128 elements.
        LyingCase{"ShapeProductOverflows",
                  [](auto* b) {
                    (*b)[RecordPos(1) + 1] = 4;
                    for (int k = 0; k < 4; ++k)
                      Put(b, RecordPos(1) + kRecShape + 4 * k, 0xFFFFFFFFu, 4);
                  },
                  "overflows"},
        // embedding (CQ) [2^32-1, 2^32-1]: fits 64 bits but not the nbytes or the geometry.
        LyingCase{"HugeCqShape",
                  [](auto* b) {
                    Put(b, RecordPos(0) + kRecShape, 0xFFFFFFFFu, 4);
                    Put(b, RecordPos(0) + kRecShape + 4, 0xFFFFFFFFu, 4);
                  },
                  "(embedding)"},
        // A consistent huge FP16 tensor: nbytes matches the shape, the blob cannot fit.
        LyingCase{"HugeConsistentFp16",
                  [](auto* b) {
                    (*b)[RecordPos(1) + 1] = 2;
                    Put(b, RecordPos(1) + kRecShape, 1u << 31, 4);
                    Put(b, RecordPos(1) + kRecShape + 4, 1u << 20, 4);
                    Put(b, RecordPos(1) + kRecNbytes, 1ull << 52, 8);
                  },
                  "(layer00.norm_in) offset"},
        LyingCase{"OffsetPastEnd",
                  [](auto* b) { Put(b, RecordPos(1) + kRecOffset, 1ull << 63, 8); },
                  "(layer00.norm_in) offset"},
        LyingCase{"OffsetPlusNbytesWraps",
                  [](auto* b) { Put(b, RecordPos(1) + kRecOffset, ~uint64_t(63), 8); },
                  "(layer00.norm_in) offset"},
        LyingCase{"OffsetInsideDirectory",
                  [](auto* b) { Put(b, RecordPos(1) + kRecOffset, 64, 8); },
                  "(layer00.norm_in) offset"},
        LyingCase{"RawNbytesHuge",
                  [](auto* b) { Put(b, RecordPos(kTok) + kRecNbytes, 1ull << 40, 8); },
                  "(tokenizer) offset"},
        LyingCase{"RawNbytesMax",
                  [](auto* b) { Put(b, RecordPos(kTok) + kRecNbytes, ~uint64_t(0), 8); },
                  "(tokenizer) offset"},
        LyingCase{"RawNbytesShort",
                  [](auto* b) {
                    Put(b, RecordPos(kTok) + kRecNbytes,
                        Get(*b, RecordPos(kTok) + kRecNbytes, 8) - 1, 8);
                  },
                  "end of file"},
        LyingCase{"RawNbytesTiny", [](auto* b) { Put(b, RecordPos(kTok) + kRecNbytes, 3, 8); },
                  "end of file"},
        LyingCase{"TokenizerHugePieceCount",
                  [](auto* b) { Put(b, Get(*b, RecordPos(kTok) + kRecOffset, 8), 0xFFFFFFFFu, 4); },
                  "tokenizer n_pieces"},
        LyingCase{
            "TokenizerPieceLengthMax",
            [](auto* b) { Put(b, Get(*b, RecordPos(kTok) + kRecOffset, 8) + 24 + 5, 0xFFFF, 2); },
            "tokenizer piece 0 length"}),
    [](const ::testing::TestParamInfo<LyingCase>& i) { return i.param.name; });

// The tokenizer parser on its own: a 24-byte blob claiming 2^32-1 pieces.
TEST(TokenizerLimits, HugePieceCountRejectedBeforeAllocating) {
  std::vector<uint8_t> blob(24, 0);
  Put(&blob, 0, 0xFFFFFFFFu, 4);
  AllocationProbe probe;
  auto t = ParseTokenizerBlob(blob, "tok", 1000);
  ASSERT_FALSE(t.ok());
  EXPECT_NE(t.status().message().find("n_pieces at offset 1000"), std::string::npos) << t.status();
  EXPECT_LT(probe.max_request(), 4096u);
}

// safetensors: an 8-byte length prefix over 100 MB is rejected without reading or
// allocating the header (the file is tiny; the prefix lies).
class SafetensorsHeaderLength : public ::testing::TestWithParam<uint64_t> {};

TEST_P(SafetensorsHeaderLength, OverLimitRejectedBeforeAllocating) {
  std::vector<uint8_t> bytes = ReadAll(Fixture("tiny", "weights.safetensors"));
  ASSERT_GT(bytes.size(), 8u);
  Put(&bytes, 0, GetParam(), 8);
  TempDir dir;
  WriteAll(dir / "w.safetensors", bytes);
  std::string msg;
  size_t max_request = 0;
  {
    AllocationProbe probe;
    auto st = ReadSafetensors(dir / "w.safetensors");
    ASSERT_FALSE(st.ok());
    msg = std::string(st.status().message());
    max_request = probe.max_request();
  }
  EXPECT_NE(msg.find("header length at offset 0"), std::string::npos) << msg;
  EXPECT_LT(max_request, kMaxSingleAllocation) << msg;
  ChildResult r = RunInChildWithAddressSpaceLimit(
      [&] { return ReadSafetensors(dir / "w.safetensors").ok() ? 1 : 0; }, kChildHeadroom);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

INSTANTIATE_TEST_SUITE_P(Lengths, SafetensorsHeaderLength,
                         ::testing::Values((100ull << 20) + 1, 200ull << 20, 1ull << 40,
                                           ~uint64_t(0), ~uint64_t(0) - 7));

// A header within the limit whose tensors lie: a shape of 2^64 elements, offsets past the data.
TEST(SafetensorsLimits, LyingEntriesRejectedBeforeAllocating) {
  const std::vector<std::string> headers = {
      R"({"a":{"dtype":"F32","shape":[4294967295,4294967295],"data_offsets":[0,16]}})",
      R"({"a":{"dtype":"F32","shape":[4294967295,4294967295,4294967295],"data_offsets":[0,16]}})",
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,18446744073709551615]}})",
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[18446744073709551600,18446744073709551615]}})",
      R"({"a":{"dtype":"F16","shape":[4],"data_offsets":[0,16]}})",
      R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,16]}})",
      R"({"a":{"dtype":"F32","shape":[4],"data_offsets":[0,16]},"b":{"dtype":"F32","shape":[2],"data_offsets":[8,16]}})",
  };
  for (const std::string& h : headers) {
    std::vector<uint8_t> bytes(8);
    Put(&bytes, 0, h.size(), 8);
    bytes.insert(bytes.end(), h.begin(), h.end());
    bytes.resize(bytes.size() + 16, 0);
    AllocationProbe probe;
    auto st = ParseSafetensors(bytes, "lying.safetensors");
    EXPECT_FALSE(st.ok()) << h;
    if (!st.ok()) {
      EXPECT_EQ(reliability::CheckFormatErrorShape(std::string(st.status().message()),
                                                   "lying.safetensors", bytes.size()),
                "");
    }
    EXPECT_LT(probe.max_request(), kMaxSingleAllocation) << h;
  }
}

// A zstd frame whose header claims 1 TiB of content but holds 4 bytes: FileBytes must
// fail cleanly without reserving the claimed size.
TEST(ZstdLimits, LyingFrameContentSizeRejected) {
  std::vector<uint8_t> frame = {0x28, 0xB5, 0x2F, 0xFD,
                                0xE0};  // descriptor: 8-byte content size, single segment
  for (int k = 0; k < 8; ++k) frame.push_back(uint8_t((1ull << 40) >> (8 * k)));
  frame.insert(frame.end(), {0x21, 0x00, 0x00});  // last block, raw, 4 bytes
  frame.insert(frame.end(), {0x83, 0x2A, 0xE1, 0x05});
  TempDir dir;
  WriteAll(dir / "m.cact.zst", frame);
  auto open = [&] {
    auto f = CactFile::Open(dir / "m.cact.zst");
    return f.ok() ? 1 : 0;
  };
  auto f = CactFile::Open(dir / "m.cact.zst");
  ASSERT_FALSE(f.ok());
  EXPECT_NE(f.status().message().find(dir / "m.cact.zst"), std::string::npos) << f.status();
  ChildResult r = RunInChildWithAddressSpaceLimit(open, kChildHeadroom);
  EXPECT_TRUE(r.exited && r.exit_code == 0) << r.describe();
}

// A compressed model truncated anywhere (about 100 lengths spread over the stream, plus
// the first bytes) is a clean error.
TEST(ZstdLimits, TruncatedCompressedModelIsACleanError) {
  const std::vector<uint8_t> raw = ReadAll(Fixture("tiny", "model.cact"));
  const std::vector<uint8_t> z = ZstdCompress(raw, 3);
  ASSERT_FALSE(z.empty());
  TempDir dir;
  int rejected = 0;
  const size_t step = z.size() / 97 + 1;
  for (size_t len = 0; len < z.size(); len += (len < 16 ? 1 : step)) {
    WriteAll(dir / "m.cact.zst", std::vector<uint8_t>(z.begin(), z.begin() + len));
    auto f = CactFile::Open(dir / "m.cact.zst");
    EXPECT_FALSE(f.ok()) << len;
    if (!f.ok()) {
      ++rejected;
      const std::string msg(f.status().message());
      EXPECT_EQ(msg.find('\n'), std::string::npos) << msg;
      EXPECT_EQ(msg.rfind(dir / "m.cact.zst", 0), 0u) << msg;
    }
  }
  EXPECT_GT(rejected, 10);
  WriteAll(dir / "m.cact.zst", z);
  EXPECT_TRUE(CactFile::Open(dir / "m.cact.zst").ok()) << "the untruncated stream must open";
}

// The probes themselves must be able to fail: a large allocation is seen, and a child
// exceeding its address-space limit dies instead of exiting normally.
TEST(AllocationProbe, SeesALargeAllocation) {
  AllocationProbe probe;
  std::vector<uint8_t> big(48u << 20, 1);
  EXPECT_GE(probe.max_request(), big.size());
}

TEST(AllocationProbe, ChildOverTheLimitDoesNotExitCleanly) {
  if (reliability::kAddressSanitizer)
    GTEST_SKIP() << "no RLIMIT_AS under ASan (its shadow memory needs terabytes of address space)";
  ChildResult r = RunInChildWithAddressSpaceLimit(
      [] {
        std::vector<uint8_t> big(1ull << 30, 1);
        return int(big[12345]) - 1;  // 0 if the allocation somehow succeeded
      },
      kChildHeadroom);
  EXPECT_FALSE(r.exited && r.exit_code == 0) << r.describe();
}

}  // namespace
}  // namespace cact
