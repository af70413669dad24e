// The same damage through the CLI: for a handful of truncations and seeded bit flips of the
// tiny fixture (plain and zstd-compressed), `cact-inspect FILE` either succeeds (exit 0) when
// the library accepts the file, or exits 2 printing exactly one line that carries the
// library's message (file, field, offset); `cact-inspect verify FILE` exits 0 / 1 with a
// one-line verdict. Never a signal.
#include <gtest/gtest.h>

#include <random>

#include "absl/strings/str_cat.h"
#include "formats/cact/cact_file.h"
#include "lib/file_bytes.h"
#include "reliability/reliability_util.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

class CliCorruption : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_TOOL_BUILT("cact-inspect");
    bytes_ = ReadAll(Fixture("tiny", "model.cact"));
    ASSERT_GT(bytes_.size(), 4096u);
  }
  std::vector<uint8_t> bytes_;
  TempDir dir_;
};

TEST_F(CliCorruption, TruncationsExitTwoWithOneLine) {
  const size_t n = bytes_.size();
  for (size_t len : {size_t(0), size_t(3), size_t(100), size_t(119), size_t(120), size_t(231),
                     size_t(232), size_t(3575), size_t(3584), size_t(3585), n / 2, n - 1}) {
    const std::string path = dir_ / absl::StrCat("t", len, ".cact");
    WriteAll(path, std::vector<uint8_t>(bytes_.begin(), bytes_.begin() + len));
    reliability::CheckInspectCli(path, "truncated to " + std::to_string(len));
  }
}

TEST_F(CliCorruption, SeededBitFlipsExitZeroOrTwo) {
  std::mt19937_64 rng(424242);
  int rejected = 0;
  for (int i = 0; i < 16; ++i) {
    std::vector<uint8_t> b = bytes_;
    const size_t pos = i % 2 ? rng() % 3584 : rng() % b.size();  // metadata, anywhere
    b[pos] ^= uint8_t(1u << (rng() % 8));
    const std::string path = dir_ / absl::StrCat("f", i, ".cact");
    WriteAll(path, b);
    rejected += !CactFile::Open(path).ok();
    reliability::CheckInspectCli(path, "bit flip at byte " + std::to_string(pos));
  }
  EXPECT_GT(rejected, 3) << "the flips should include rejected files";
}

TEST_F(CliCorruption, TruncatedZstdExitsTwoWithOneLine) {
  const std::vector<uint8_t> z = ZstdCompress(bytes_, 3);
  ASSERT_FALSE(z.empty());
  for (size_t len : {size_t(4), size_t(20), z.size() / 3, z.size() - 1}) {
    const std::string path = dir_ / absl::StrCat("z", len, ".cact.zst");
    WriteAll(path, std::vector<uint8_t>(z.begin(), z.begin() + len));
    reliability::CheckInspectCli(path, "zstd truncated to " + std::to_string(len));
  }
}

}  // namespace
}  // namespace cact
