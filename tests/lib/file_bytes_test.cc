// FileBytes::ReadOut: the bytes read out equal the mapped bytes for mapped, decompressed and
// in-memory inputs, and reading a mapped file through it leaves the mapping out of the
// process's resident set (Rss from /proc/self/smaps, the kernel's own accounting).
// FileBytes::ReleaseColdPages: cold pages leave the resident set and become regions of
// their own, hot ones stay, and every byte still reads the same.
#include <gtest/gtest.h>

#include <unistd.h>

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

std::vector<uint8_t> CompressibleBytes(size_t n, uint32_t seed) {
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
  const std::vector<uint8_t> data = CompressibleBytes(300000, 1);
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
  const std::vector<uint8_t> data = CompressibleBytes(1 << 20, 2);
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

// The smaps region (start address) containing `p`, or 0.
uintptr_t RegionStart(const void* p) {
  std::ifstream smaps("/proc/self/smaps");
  std::string line;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  while (std::getline(smaps, line)) {
    unsigned long lo = 0, hi = 0;
    if (std::sscanf(line.c_str(), "%lx-%lx ", &lo, &hi) == 2 && line.find(' ') > line.find('-') &&
        addr >= lo && addr < hi)
      return lo;
  }
  return 0;
}

TEST(FileBytes, ReleaseColdPagesDropsOnlyColdPagesAndKeepsTheBytes) {
  TempDir dir;
  const size_t page = size_t(sysconf(_SC_PAGESIZE));
  const std::vector<uint8_t> data = CompressibleBytes(256 * page + 123, 3);
  WriteAll(dir / "plain.bin", data);
  auto fb = FileBytes::Open(dir / "plain.bin");
  ASSERT_TRUE(fb.ok()) << fb.status();
  const uint8_t* b = fb->data();
  // Everything resident first, as after a load that read the whole file.
  ASSERT_EQ(0, std::memcmp(b, data.data(), data.size()));
  ASSERT_GE(ResidentKb(b), long(256 * page / 1024));
  // Hot: pages [10, 20) exactly, and a range from the middle of page 100 to the middle of
  // page 103 (pages 100..103 stay, whole). Cold: 0..9, 20..99, 104..255 (the partial
  // last page is past the rounding and stays).
  const std::vector<std::span<const uint8_t>> hot = {fb->span().subspan(100 * page + 7, 3 * page),
                                                     fb->span().subspan(10 * page, 10 * page)};
  EXPECT_EQ(fb->ReleaseColdPages(hot), (10 + 80 + 152) * page);
  // The hot pages are resident regions of their own; the cold ones are out of the set.
  EXPECT_EQ(ResidentKb(b + 10 * page), long(10 * page / 1024));
  EXPECT_EQ(RegionStart(b + 10 * page), uintptr_t(b + 10 * page));
  EXPECT_EQ(ResidentKb(b + 100 * page), long(4 * page / 1024));
  EXPECT_EQ(ResidentKb(b), 0);
  EXPECT_EQ(ResidentKb(b + 50 * page), 0);
  EXPECT_NE(RegionStart(b), RegionStart(b + 50 * page));
  // Cold bytes read back from the page cache, unchanged.
  EXPECT_EQ(0, std::memcmp(b, data.data(), data.size()));
  // In-memory bytes: nothing to release.
  const FileBytes mem = FileBytes::FromBuffer("memory", data);
  EXPECT_EQ(mem.ReleaseColdPages({}), 0u);
}

}  // namespace
}  // namespace cact
