// `cact-torch import` on damaged TorchScript archives (a deterministic sweep instead of a
// libFuzzer target: libtorch under ASan + libFuzzer is impractical). The tiny fixture is
// exported once; each damaged copy (truncations, a wiped zip directory, flipped bytes in the
// pickle, the TorchScript code, a tensor's data, the version record, garbage) must make the
// import exit 0 with a valid output, or exit 2 with one line and no output; never a signal.
// Skipped when cact-torch is not built (CACT_WITH_TORCH=OFF). CACT_TORCH_TOOL overrides the
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

// Start and size of the (stored or deflated) bytes of zip member `suffix` (the first whose
// name ends with it), found through the central directory (the local headers of a .pt
// carry sizes only in data descriptors); npos when absent.
size_t MemberData(const std::vector<uint8_t>& z, const std::string& suffix, size_t* size) {
  auto u16 = [&](size_t p) { return size_t(z[p] | (z[p + 1] << 8)); };
  auto u32 = [&](size_t p) { return size_t(u16(p) | (u16(p + 2) << 16)); };
  if (z.size() < 22) return std::string::npos;
  size_t eocd = z.size() - 22;
  while (eocd > 0 && u32(eocd) != 0x06054b50) --eocd;
  if (u32(eocd) != 0x06054b50) return std::string::npos;
  const size_t entries = u16(eocd + 10);
  size_t p = u32(eocd + 16);
  for (size_t i = 0; i < entries && p + 46 <= z.size() && u32(p) == 0x02014b50; ++i) {
    const size_t csize = u32(p + 20), n = u16(p + 28), extra = u16(p + 30), comment = u16(p + 32);
    const size_t local = u32(p + 42);
    const std::string name(z.begin() + p + 46, z.begin() + p + 46 + n);
    if (name.size() >= suffix.size() && name.compare(name.size() - suffix.size(), suffix.size(), suffix) == 0 &&
        local + 30 <= z.size()) {
      *size = csize;
      return local + 30 + u16(local + 26) + u16(local + 28);
    }
    p += 46 + n + extra + comment;
  }
  return std::string::npos;
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
                        Flip{"code/__torch__/cact.py", 0.3}, Flip{"version", 0.0}, Flip{"constants.pkl", 0.5},
                        Flip{"data/0", 0.5}}) {
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
  if (access(TorchTool().c_str(), X_OK) != 0) GTEST_SKIP() << "cact-torch not built (CACT_WITH_TORCH=OFF)";
  TempDir dir;
  auto exported = testing::Run(TorchTool() + " export " + Fixture("tiny", "model.cact") + " -o " + (dir / "m.pt"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  const std::vector<uint8_t> pt = ReadAll(dir / "m.pt");
  size_t size = 0;
  ASSERT_NE(MemberData(pt, "data.pkl", &size), std::string::npos) << "no data.pkl in the exported archive";
  int rejected = 0;
  for (const Damage& d : DamagedCopies(pt)) {
    SCOPED_TRACE(d.what);
    WriteAll(dir / "bad.pt", d.bytes);
    std::filesystem::remove(dir / "out.cact");
    auto r = testing::Run(TorchTool() + " import " + (dir / "bad.pt") + " -o " + (dir / "out.cact"));
    EXPECT_EQ(r.signal, 0);
    EXPECT_TRUE(r.exit_code == 0 || r.exit_code == 2)
        << "exit " << r.exit_code << " (134 abort, 139 SIGSEGV): " << r.output.substr(0, 1500);
    if (r.exit_code == 0) {
      EXPECT_TRUE(CactFile::Open(dir / "out.cact").ok()) << "import succeeded but wrote an invalid file";
    } else {
      ++rejected;
      std::string out = r.output;
      while (!out.empty() && out.back() == '\n') out.pop_back();
      EXPECT_EQ(std::count(out.begin(), out.end(), '\n'), 0) << "more than one line:\n" << out.substr(0, 1500);
      EXPECT_FALSE(std::filesystem::exists(dir / "out.cact")) << "a failed import left an output";
    }
  }
  EXPECT_GE(rejected, 6) << "truncations, garbage and a wiped directory must be rejected";
}

}  // namespace
}  // namespace cact
