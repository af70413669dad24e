// `cact-torch import` on damaged TorchScript archives: a deterministic sweep, then the
// regressions found by tests/fuzz/torch/fuzz_torch_import (libFuzzer). The tiny fixture is
// exported once; each damaged copy (truncations, a wiped zip directory, flipped bytes in the
// pickle, the TorchScript code, a tensor's data, the version record, garbage) must make the
// import exit 0 with a valid output, or exit 2 with one line and no output; never a signal.
// Built only with CACT_WITH_TORCH (tests/CMakeLists.txt). CACT_TORCH_TOOL overrides the
// binary (to run this sweep against another build's cact-torch).
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>

#include "formats/cact/cact_file.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::Fixture;
using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

std::string TorchTool() {
  const char* env = std::getenv("CACT_TORCH_TOOL");
  return env && *env ? env : testing::Tool("cact-torch");
}

size_t U16(const std::vector<uint8_t>& z, size_t p) { return size_t(z[p] | (z[p + 1] << 8)); }
size_t U32(const std::vector<uint8_t>& z, size_t p) { return U16(z, p) | (U16(z, p + 2) << 16); }

// Offset of the central directory entry of zip member `suffix` (the first whose name ends
// with it); npos when absent.
size_t CentralEntry(const std::vector<uint8_t>& z, const std::string& suffix) {
  if (z.size() < 22) return std::string::npos;
  size_t eocd = z.size() - 22;
  while (eocd > 0 && U32(z, eocd) != 0x06054b50) --eocd;
  if (U32(z, eocd) != 0x06054b50) return std::string::npos;
  const size_t entries = U16(z, eocd + 10);
  size_t p = U32(z, eocd + 16);
  for (size_t i = 0; i < entries && p + 46 <= z.size() && U32(z, p) == 0x02014b50; ++i) {
    const size_t n = U16(z, p + 28), extra = U16(z, p + 30), comment = U16(z, p + 32);
    const std::string name(z.begin() + p + 46, z.begin() + p + 46 + n);
    if (name.size() >= suffix.size() &&
        name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        U32(z, p + 42) + 30 <= z.size()) {
      return p;
    }
    p += 46 + n + extra + comment;
  }
  return std::string::npos;
}

// Start and size of the (stored or deflated) bytes of zip member `suffix`, found through
// the central directory (the local headers of a .pt carry sizes only in data
// descriptors); npos when absent.
size_t MemberData(const std::vector<uint8_t>& z, const std::string& suffix, size_t* size) {
  const size_t p = CentralEntry(z, suffix);
  if (p == std::string::npos) return p;
  const size_t local = U32(z, p + 42);
  *size = U32(z, p + 20);
  return local + 30 + U16(z, local + 26) + U16(z, local + 28);
}

// Bitwise CRC-32 (zip's polynomial), for damage that keeps the archive's checksums right.
uint32_t Crc32(const uint8_t* p, size_t n) {
  uint32_t c = 0xFFFFFFFFu;
  for (size_t i = 0; i < n; ++i) {
    c ^= p[i];
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xEDB88320u & (0u - (c & 1)));
  }
  return ~c;
}

void Put32(std::vector<uint8_t>& z, size_t at, uint32_t v) {
  for (int i = 0; i < 4; ++i) z[at + i] = uint8_t(v >> (8 * i));
}

// Declares stored member `suffix` to be `size` bytes (its first ones) with the CRC-32 they
// have, in the central directory and the local header, as a tool writing a short record would.
void ResizeStoredMember(std::vector<uint8_t>& z, const std::string& suffix, uint32_t size) {
  const size_t entry = CentralEntry(z, suffix);
  ASSERT_NE(entry, std::string::npos) << suffix;
  size_t old = 0;
  const size_t data = MemberData(z, suffix, &old);
  ASSERT_LE(size, old);
  const size_t local = U32(z, entry + 42);
  const uint32_t crc = Crc32(z.data() + data, size);
  for (size_t at : {entry + 16, local + 14}) Put32(z, at, crc);
  for (size_t at : {entry + 20, entry + 24, local + 18, local + 22}) Put32(z, at, size);
}

struct Damage {
  std::string what;
  std::vector<uint8_t> bytes;
};

std::vector<Damage> DamagedCopies(const std::vector<uint8_t>& pt) {
  std::vector<Damage> out;
  const size_t n = pt.size();
  for (size_t len : {size_t(0), size_t(100), n / 2, n - 22, n - 1})
    out.push_back({"truncated to " + std::to_string(len), {pt.begin(), pt.begin() + len}});
  {
    Damage d{"zip end-of-directory record zeroed", pt};
    std::fill(d.bytes.end() - 22, d.bytes.end(), 0);
    out.push_back(d);
  }
  struct Flip {
    std::string member;
    double at;  // fraction into the member
  };
  for (const Flip& f : {Flip{"data.pkl", 0.0}, Flip{"data.pkl", 0.5}, Flip{"data.pkl", 0.97},
                        Flip{"code/__torch__/cact.py", 0.3}, Flip{"version", 0.0},
                        Flip{"constants.pkl", 0.5}, Flip{"data/0", 0.5}}) {
    size_t size = 0;
    const size_t data = MemberData(pt, f.member, &size);
    if (data == std::string::npos || size == 0) continue;
    Damage d{"byte flipped in " + f.member + " at " + std::to_string(f.at), pt};
    d.bytes[data + size_t(f.at * (size - 1))] ^= 0x5A;
    out.push_back(d);
  }
  out.push_back({"not a zip", std::vector<uint8_t>(4096, 0x41)});
  out.push_back({"a .cact named .pt", ReadAll(Fixture("tiny", "model.cact"))});
  return out;
}

TEST(TorchImportDamage, DamagedArchivesExitCleanly) {
  ASSERT_EQ(access(TorchTool().c_str(), X_OK), 0) << "cact-torch is not built: " << TorchTool();
  TempDir dir;
  auto exported = testing::Run(TorchTool() + " export " + Fixture("tiny", "model.cact") + " -o " +
                               (dir / "m.pt"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::vector<uint8_t> pt = ReadAll(dir / "m.pt");
  size_t size = 0;
  ASSERT_NE(MemberData(pt, "data.pkl", &size), std::string::npos)
      << "no data.pkl in the exported archive";
  int rejected = 0;
  for (const Damage& d : DamagedCopies(pt)) {
    SCOPED_TRACE(d.what);
    WriteAll(dir / "bad.pt", d.bytes);
    std::filesystem::remove(dir / "out.cact");
    auto r =
        testing::Run(TorchTool() + " import " + (dir / "bad.pt") + " -o " + (dir / "out.cact"));
    EXPECT_EQ(r.signal, 0);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2)
        << "exit " << r.exit_code << " (134 abort, 139 SIGSEGV): " << r.output.substr(0, 1500);
    if (r.exit_code == 0) {
      EXPECT_TRUE(CactFile::Open(dir / "out.cact").ok())
          << "import succeeded but wrote an invalid file";
    } else {
      ++rejected;
      std::string out = r.output;
      while (!out.empty() && out.back() == '\n') out.pop_back();
      EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 0) << "more than one line:\n"
                                                             << out.substr(0, 1500);
      EXPECT_FALSE(std::filesystem::exists(dir / "out.cact")) << "a failed import left an output";
    }
  }
  EXPECT_GE(rejected, 6) << "truncations, garbage and a wiped directory must be rejected";
}

struct ImportResult {
  int exit_code, signal;
  std::string output;
  bool wrote;
};

ImportResult ImportBytes(const TempDir& dir, const std::vector<uint8_t>& pt) {
  WriteAll(dir / "bad.pt", pt);
  std::filesystem::remove(dir / "out.cact");
  auto r = testing::Run(TorchTool() + " import " + (dir / "bad.pt") + " -o " + (dir / "out.cact"));
  return {r.exit_code, r.signal, r.output.substr(0, 1500),
          std::filesystem::exists(dir / "out.cact")};
}

// Regressions from fuzz_torch_import: damage that libtorch 1.13 does not notice itself. Each
// must end in exit 2 naming the damage, no output, no signal.
class TorchImportRegression : public ::testing::Test {
 protected:
  void SetUp() override {
    ASSERT_EQ(access(TorchTool().c_str(), X_OK), 0) << "cact-torch is not built: " << TorchTool();
    auto exported = testing::Run(TorchTool() + " export " + Fixture("tiny", "model.cact") + " -o " +
                                 (dir_ / "m.pt"));
    ASSERT_EQ(exported.exit_code, 0) << exported.output;
    pt_ = ReadAll(dir_ / "m.pt");
  }
  void ExpectRejected(const std::vector<uint8_t>& bad, const std::string& says) {
    ImportResult r = ImportBytes(dir_, bad);
    EXPECT_EQ(r.signal, 0);
    EXPECT_EQ(r.exit_code, 2) << r.output;
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output;
    EXPECT_FALSE(r.wrote) << "a failed import left an output";
  }
  // The export with one byte of a weight record (data/0) flipped: its stored CRC-32 no
  // longer matches.
  std::vector<uint8_t> FlippedWeightByte() {
    size_t size = 0;
    const size_t data = MemberData(pt_, "/data/0", &size);
    EXPECT_NE(data, std::string::npos);
    std::vector<uint8_t> bad = pt_;
    if (data != std::string::npos) bad[data + size / 2] ^= 0x40;
    return bad;
  }
  // The export with data.pkl's LONG_BINPUT 256 naming memo id 0xFFFFFFF0 (64 GB: refused
  // by the allocator if the check ever goes, so the tests stay safe to run); the member's
  // CRC-32 is made right, so only the pickle check can catch it.
  std::vector<uint8_t> MemoIdFarAhead() {
    size_t size = 0;
    const size_t pkl = MemberData(pt_, "/data.pkl", &size);
    EXPECT_NE(pkl, std::string::npos);
    if (pkl == std::string::npos) return pt_;
    const std::vector<uint8_t> put256 = {'r', 0x00, 0x01, 0x00, 0x00};
    auto at =
        std::search(pt_.begin() + pkl, pt_.begin() + pkl + size, put256.begin(), put256.end());
    EXPECT_NE(at, pt_.begin() + pkl + size) << "no LONG_BINPUT 256 in data.pkl";
    std::vector<uint8_t> bad = pt_;
    if (at == pt_.begin() + pkl + size) return bad;
    Put32(bad, size_t(at - pt_.begin()) + 1, 0xFFFFFFF0u);
    ResizeStoredMember(bad, "/data.pkl", uint32_t(size));  // same size, CRC-32 made right
    return bad;
  }
  TempDir dir_;
  std::vector<uint8_t> pt_;
};

// libtorch sizes a loaded tensor's storage by the element count in the pickle, not by its
// data record: a record shorter than its tensor made the import read past it (a parameter
// became heap garbage, "non-finite value"; a carried buffer was copied out of bounds).
TEST_F(TorchImportRegression, RecordShorterThanItsTensor) {
  // data/0 is a parameter (the embedding); the highest-numbered record is a carried buffer.
  std::string last;
  for (int i = 0; CentralEntry(pt_, "/data/" + std::to_string(i)) != std::string::npos; ++i) {
    last = "/data/" + std::to_string(i);
  }
  ASSERT_FALSE(last.empty()) << "no data records in the exported archive";
  for (const std::string& member : {std::string("/data/0"), last}) {
    SCOPED_TRACE(member);
    std::vector<uint8_t> bad = pt_;
    ResizeStoredMember(bad, member, 1);
    ExpectRejected(bad, "than its data record holds");
  }
}

// libtorch's unpickler grows its memo table to whatever id a LONG_BINPUT names (a damaged
// id made it allocate 9 GB). The id for memo entry 256 becomes 0xFFFFFFF0 (64 GB: refused
// by the allocator if the check ever goes, so the test stays safe to run).
TEST_F(TorchImportRegression, PickleMemoIdFarAhead) {
  ExpectRejected(MemoIdFarAhead(), "memo id 4294967280");
}

// libtorch does not check CRC-32s: a flipped byte in a weight imported as an edit.
TEST_F(TorchImportRegression, DamagedMemberFailsItsCrc) {
  ExpectRejected(FlippedWeightByte(), "CRC-32 mismatch");
}

// libtorch crashes (SIGSEGV in ScriptTypeParser::parseClassConstant) compiling a class body
// that assigns a name without a type; fuzz_torch_import found it as a damaged
// "__parameters__". The code member is rewritten by Python's zipfile (it is deflated).
TEST_F(TorchImportRegression, UntypedClassAttributeInCode) {
  const std::string script =
      "import sys, zipfile\n"
      "src, dst = zipfile.ZipFile(sys.argv[1]), zipfile.ZipFile(sys.argv[2], 'w')\n"
      "done = False\n"
      "for info in src.infolist():\n"
      "    data = src.read(info)\n"
      "    if info.filename.endswith('.py') and not done and b'  __buffers__ = ' in data:\n"
      "        data, done = data.replace(b'  __buffers__ = ', b'  __buffers_x = ', 1), True\n"
      "    dst.writestr(info, data)\n"
      "dst.close()\n"
      "sys.exit(0 if done else 3)\n";
  WriteAll(dir_ / "damage.py", std::vector<uint8_t>(script.begin(), script.end()));
  auto made = testing::Run(std::string(CACT_PYTHON) + " " + (dir_ / "damage.py") + " " +
                           (dir_ / "m.pt") + " " + (dir_ / "untyped.pt"));
  ASSERT_EQ(made.exit_code, 0) << "no '__buffers__ = ' line in the exported code: " << made.output;
  ExpectRejected(ReadAll(dir_ / "untyped.pt"), "'__buffers_x' assigned without a type");
}

// `cact-torch run` loads through the same archive checks: the 64 GB memo id and a damaged
// weight are clean errors there too (exit 2, one line), never a crash or a run on garbage.
TEST_F(TorchImportRegression, RunRefusesDamagedArchivesToo) {
  const std::vector<uint8_t> flipped = FlippedWeightByte(), memo = MemoIdFarAhead();
  for (const auto& [bad, says] : {std::pair{flipped, std::string("CRC-32 mismatch")},
                                  std::pair{memo, std::string("memo id 4294967280")}}) {
    WriteAll(dir_ / "bad.pt", bad);
    auto r = testing::Run(TorchTool() + " run " + (dir_ / "bad.pt") + " --tokens 2,17,40");
    EXPECT_EQ(r.signal, 0);
    EXPECT_EQ(r.exit_code, 2) << r.output.substr(0, 1500);
    EXPECT_NE(r.output.find(says), std::string::npos) << r.output.substr(0, 1500);
  }
  // The undamaged export still runs.
  auto ok = testing::Run(TorchTool() + " run " + (dir_ / "m.pt") + " --tokens 2,17,40");
  EXPECT_EQ(ok.exit_code, 0) << ok.output.substr(0, 1500);
}

}  // namespace
}  // namespace cact
