// FileBytes::ReadOut: the bytes read out equal the mapped bytes for mapped, decompressed and
// in-memory inputs, and reading a mapped file through it leaves the mapping out of the
// process's resident set (Rss from /proc/self/smaps, the kernel's own accounting).
#include <gtest/gtest.h>

#include <cstdio>
#include <cstring>
#include <fstream>
#include <random>
#include <sstream>

#include "lib/atomic_file.h"
#include "lib/file_bytes.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::TempDir;
using testing::WriteAll;

std::vector<uint8_t> RandomBytes(size_t n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::vector<uint8_t> v(n);
  for (auto& b : v) b = uint8_t(rng() % 5);  // compressible, for the zstd case
  return v;
}

// Resident kB of the mapping that contains `p`, from /proc/self/smaps.
long ResidentKb(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  bool in_range = false;
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(' ') > line.find('-')) {
      in_range = addr >= lo && addr < hi;
      continue;
    }
    if (in_range && line.rfind("Rss:", 0) == 0) return std::stol(line.substr(4));
  }
  return -1;
}

void ExpectReadOutMatches(const FileBytes& fb, const std::vector<uint8_t>& data) {
  ASSERT_EQ(fb.size(), data.size());
  std::mt19937 rng(7);
  for (int i = 0; i < 200; ++i) {
    const size_t off = rng() % data.size(), len = std::min<size_t>(rng() % 5000, data.size() - off);
    std::vector<uint8_t> out(len, 0xEE);
    fb.ReadOut(fb.span().subspan(off, len), out.data());
    ASSERT_EQ(0, std::memcmp(out.data(), data.data() + off, len)) << "offset " << off;
  }
  std::vector<uint8_t> all(data.size());
  fb.ReadOut(fb.span(), all.data());
  EXPECT_TRUE(all == data);
}

TEST(FileBytes, ReadOutEqualsTheBytesForEveryKindOfInput) {
  TempDir dir;
  const std::vector<uint8_t> data = RandomBytes(300000, 1);
  WriteAll(dir / "plain.bin", data);
  ASSERT_TRUE(WriteFileAtomic(dir / "packed.bin.zst", data, 3).ok());
  auto mapped = FileBytes::Open(dir / "plain.bin");
  ASSERT_TRUE(mapped.ok()) << mapped.status();
  ASSERT_TRUE(mapped->mapped());
  ExpectReadOutMatches(*mapped, data);
  auto packed = FileBytes::Open(dir / "packed.bin.zst");
  ASSERT_TRUE(packed.ok()) << packed.status();
  ASSERT_TRUE(packed->decompressed());
  ExpectReadOutMatches(*packed, data);
  ExpectReadOutMatches(FileBytes::FromBuffer("memory", data), data);
}

TEST(FileBytes, ReadOutLeavesTheMappingOutOfTheResidentSet) {
  TempDir dir;
  const std::vector<uint8_t> data = RandomBytes(1 << 20, 2);
  WriteAll(dir / "plain.bin", data);
  auto fb = FileBytes::Open(dir / "plain.bin");
  ASSERT_TRUE(fb.ok()) << fb.status();
  // mmap does not populate; Open read the first bytes (the zstd magic): that fault maps
  // the first page, or up to 64 kB when the kernel maps cached neighbours with it
  // (fault-around). Well below the file's 1,024 kB either way.
  const long before = ResidentKb(fb->data());
  ASSERT_LE(before, 256);
  // ReadOut reads the file, not the mapping: nothing more becomes resident.
  std::vector<uint8_t> all(data.size());
  fb->ReadOut(fb->span(), all.data());
  EXPECT_TRUE(all == data);
  EXPECT_EQ(ResidentKb(fb->data()), before);
  // The measurement can see residency: reading through the mapping makes it resident.
  EXPECT_EQ(0, std::memcmp(fb->data(), data.data(), data.size()));
  EXPECT_GE(ResidentKb(fb->data()), 1000);
}

}  // namespace
}  // namespace cact
