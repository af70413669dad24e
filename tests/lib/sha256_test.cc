// lib/sha256: FIPS 180-4 example vectors, then hashlib (/usr/bin/python3) as the oracle for
// every length 0..200, the lengths around each padding boundary (55/56 bytes left in the last
// block: one or two padding blocks) and a few random multi-megabyte buffers at unaligned
// starts. The portable and SHA-NI compression functions are each checked on their own.
#include <gtest/gtest.h>

#include <fstream>
#include <random>
#include <sstream>

#include "lib/sha256.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Run;
using testing::TempDir;
using testing::WriteAll;

std::string Hex(const std::array<uint8_t, 32>& digest) {
  std::string out;
  for (uint8_t b : digest) {
    static constexpr char kHex[] = "0123456789abcdef";
    out += kHex[b >> 4];
    out += kHex[b & 15];
  }
  return out;
}

std::span<const uint8_t> Bytes(const std::string& s) {
  return {reinterpret_cast<const uint8_t*>(s.data()), s.size()};
}

// The implementations under test: the portable one always, SHA-NI when this CPU has it.
std::vector<Sha256Impl> Impls() {
  std::vector<Sha256Impl> impls = {Sha256Impl::kPortable};
  if (Sha256ShaNiAvailable()) impls.push_back(Sha256Impl::kShaNi);
  return impls;
}
const char* Name(Sha256Impl impl) { return impl == Sha256Impl::kPortable ? "portable" : "sha-ni"; }

TEST(Sha256, FipsExampleVectors) {
  const std::vector<uint8_t> million(1000000, 'a');
  for (Sha256Impl impl : Impls()) {
    SCOPED_TRACE(Name(impl));
    EXPECT_EQ(Hex(Sha256Digest({}, impl)),
              "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
    EXPECT_EQ(Hex(Sha256Digest(Bytes("abc"), impl)),
              "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
    EXPECT_EQ(
        Hex(Sha256Digest(Bytes("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"), impl)),
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
    EXPECT_EQ(Hex(Sha256Digest(million, impl)),
              "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  }
  // Sha256Hex is the default path, lowercase hex.
  EXPECT_EQ(Sha256Hex(Bytes("abc")),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

// One python3 run hashes data[offset : offset + length] for every (offset, length) asked.
struct Slice {
  size_t offset, length;
};

std::vector<std::string> HashlibDigests(const TempDir& dir, const std::vector<uint8_t>& data,
                                        const std::vector<Slice>& slices) {
  WriteAll(dir / "data.bin", data);
  std::ofstream spec(dir / "slices.txt");
  for (const Slice& s : slices) spec << s.offset << ' ' << s.length << '\n';
  spec.close();
  std::ofstream(dir / "oracle.py") << "import hashlib, sys\n"
                                      "data = open(sys.argv[1], 'rb').read()\n"
                                      "for line in open(sys.argv[2]):\n"
                                      "    o, n = map(int, line.split())\n"
                                      "    print(hashlib.sha256(data[o:o + n]).hexdigest())\n";
  auto r = Run(testing::Python() + " " + (dir / "oracle.py") + " " + (dir / "data.bin") + " " +
               (dir / "slices.txt"));
  EXPECT_EQ(r.exit_code, 0) << r.output;
  std::vector<std::string> digests;
  std::istringstream lines(r.output);
  for (std::string line; std::getline(lines, line);) digests.push_back(line);
  return digests;
}

void ExpectMatchesHashlib(const std::vector<uint8_t>& data, const std::vector<Slice>& slices) {
  TempDir dir;
  const std::vector<std::string> expected = HashlibDigests(dir, data, slices);
  ASSERT_EQ(expected.size(), slices.size());
  for (Sha256Impl impl : Impls()) {
    for (size_t i = 0; i < slices.size(); ++i) {
      const Slice& s = slices[i];
      ASSERT_EQ(Hex(Sha256Digest(std::span(data).subspan(s.offset, s.length), impl)), expected[i])
          << Name(impl) << " offset " << s.offset << " length " << s.length;
    }
  }
}

std::vector<uint8_t> RandomBytes(size_t n, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint8_t> out(n);
  for (auto& b : out) b = uint8_t(rng());
  return out;
}

TEST(Sha256, EveryShortLengthAndPaddingBoundaryMatchesHashlib) {
  const std::vector<uint8_t> data = RandomBytes(70000, 1);
  std::vector<Slice> slices;
  for (size_t n = 0; n <= 200; ++n) slices.push_back({0, n});
  // Around each block end: 55 bytes left still fits the 9 padding bytes, 56 needs a second block.
  for (size_t blocks : {1, 2, 3, 7, 16, 64, 1000}) {
    for (int delta : {-10, -9, -8, -7, -1, 0, 1, 55, 56, 57})
      slices.push_back({0, 64 * blocks + delta});
  }
  // Unaligned starts (the SHA-NI path loads unaligned; the portable one reads bytes).
  for (size_t offset : {1, 3, 7, 13}) {
    for (size_t n : {0, 55, 56, 63, 64, 65, 119, 120, 4096 + 3}) slices.push_back({offset, n});
  }
  ExpectMatchesHashlib(data, slices);
}

TEST(Sha256, RandomMegabyteBuffersMatchHashlib) {
  const std::vector<uint8_t> data = RandomBytes(6 << 20, 2);
  ExpectMatchesHashlib(
      data, {{0, 6 << 20}, {5, (2 << 20) + 17}, {1 << 20, 3000001}, {11, (5 << 20) + 63}});
}

TEST(Sha256, PathsAgreeOnRandomLengths) {
  if (!Sha256ShaNiAvailable())
    GTEST_SKIP() << "this CPU has no SHA-NI: only the portable path runs";
  std::mt19937_64 rng(3);
  const std::vector<uint8_t> data = RandomBytes(1 << 16, 4);
  for (int i = 0; i < 2000; ++i) {
    const size_t offset = rng() % 64, length = rng() % (data.size() - 64);
    const auto slice = std::span(data).subspan(offset, length);
    ASSERT_EQ(Sha256Digest(slice, Sha256Impl::kPortable), Sha256Digest(slice, Sha256Impl::kShaNi))
        << "offset " << offset << " length " << length;
  }
}

}  // namespace
}  // namespace cact
