// lib/: npy round trip (and numpy as the oracle for reading), atomic writes leave no
// temporary file behind, zstd round trip and bounds (SHA-256:
// sha256_test.cc).
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>

#include "lib/atomic_file.h"
#include "lib/cpu_features.h"
#include "lib/file_bytes.h"
#include "lib/npy.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

using testing::Listing;

// The AMX check asks Linux once and answers the same every time; the vpermb bit comes with
// AVX-512 (both need the OS to save the zmm state).
TEST(CpuFeatures, AmxAndVbmiAreConsistent) {
  const CpuFeatures& f = GetCpuFeatures();
  EXPECT_TRUE(!f.avx512_vbmi || f.avx512f);
  const bool amx = AmxInt8Usable();
  EXPECT_EQ(AmxInt8Usable(), amx);
  EXPECT_GE(AvailableCpus(), 1);
}

TEST(Npy, F32RoundTrip) {
  TempDir dir;
  std::vector<float> data(3 * 5);
  for (size_t i = 0; i < data.size(); ++i) data[i] = std::ldexp(float(i) - 7.25f, int(i % 5) - 2);
  data[3] = -0.0f;
  data[4] = INFINITY;
  ASSERT_TRUE(WriteNpy(dir / "a.npy", data.data(), {3, 5}).ok());
  auto a = ReadNpy(dir / "a.npy");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape, (std::vector<size_t>{3, 5}));
  EXPECT_EQ(a->dtype, "<f4");
  ASSERT_EQ(a->data.size(), data.size());
  EXPECT_EQ(std::memcmp(a->data.data(), data.data(), 4 * data.size()), 0);
  EXPECT_EQ(Listing(dir.path()), std::vector<std::string>{"a.npy"});
}

TEST(Npy, NumpyReadsOursAndWeReadNumpys) {
  TempDir dir;
  const std::vector<float> data = {1.5f, -2.25f, 3e-8f, 65504.0f, -0.0f, 7.0f};
  ASSERT_TRUE(WriteNpy(dir / "ours.npy", data.data(), {2, 3}).ok());
  const std::string py =
      "import numpy as np, sys\n"
      "d=sys.argv[1]\n"
      "a=np.load(d+'/ours.npy'); assert a.dtype==np.float32 and a.shape==(2,3), (a.dtype,a.shape)\n"
      "print(' '.join(repr(float(x)) for x in a.ravel()))\n"
      "v=np.array([[1.5,-2.25,3e-8],[65504,-0.0,7]])\n"
      "for t in ['<f2','<f4','<f8','<i4','<i8','|u1']:\n"
      "  a=(np.abs(v) if t=='|u1' else v).astype(t); np.save(d+'/np_'+t.strip('<|')+'.npy', a)\n"
      "  print(' '.join(repr(float(x)) for x in a.astype(np.float32).ravel()))\n"
      "np.save(d+'/np_0d.npy', np.float32(2.5))\n";
  WriteAll(dir / "t.py", std::vector<uint8_t>(py.begin(), py.end()));
  auto r = testing::Run(testing::Python() + " " + dir / "t.py" + " " + dir.path());
  ASSERT_EQ(r.exit_code, 0) << r.output;
  std::istringstream in(r.output);
  for (float want : data) {
    double got;
    in >> got;
    EXPECT_EQ(float(got), want);
  }
  // numpy's own float32 view of each saved array is the oracle for our conversion.
  for (const std::string t : {"f2", "f4", "f8", "i4", "i8", "u1"}) {
    auto a = ReadNpy(dir / ("np_" + t + ".npy"));
    ASSERT_TRUE(a.ok()) << t << ": " << a.status();
    EXPECT_EQ(a->shape, (std::vector<size_t>{2, 3})) << t;
    ASSERT_EQ(a->data.size(), 6u);
    for (size_t i = 0; i < 6; ++i) {
      double want;
      in >> want;
      EXPECT_EQ(a->data[i], float(want)) << t << "[" << i << "]";
    }
  }
  auto zero_d = ReadNpy(dir / "np_0d.npy");
  ASSERT_TRUE(zero_d.ok()) << zero_d.status();
  EXPECT_TRUE(zero_d->shape.empty());
  ASSERT_EQ(zero_d->data.size(), 1u);
  EXPECT_EQ(zero_d->data[0], 2.5f);
}

TEST(Npy, TruncatedDataRejected) {
  const std::vector<float> data(10, 1.0f);
  std::vector<uint8_t> bytes = SerializeNpyF32(data.data(), {10});
  bytes.resize(bytes.size() - 4);
  auto a = ParseNpy("x.npy", bytes.data(), bytes.size());
  ASSERT_FALSE(a.ok());
  EXPECT_NE(a.status().message().find("x.npy: npy data at offset"), std::string::npos)
      << a.status();
}

TEST(AtomicFile, WriterDestroyedWithoutCommitLeavesNothing) {
  TempDir dir;
  WriteAll(dir / "out.bin", {1, 2, 3});
  {
    auto w = AtomicFileWriter::Create(dir / "out.bin");
    ASSERT_TRUE(w.ok()) << w.status();
    ASSERT_TRUE(w->Write(std::vector<uint8_t>(1000, 7)).ok());
    EXPECT_TRUE(std::filesystem::exists(w->temp_path()));
  }  // interrupted: destroyed before Commit
  EXPECT_EQ(Listing(dir.path()), std::vector<std::string>{"out.bin"});
  EXPECT_EQ(ReadAll(dir / "out.bin"), (std::vector<uint8_t>{1, 2, 3}));  // old output intact
}

TEST(AtomicFile, FailedRenameLeavesNoTemp) {
  TempDir dir;
  // The target becomes a non-empty directory while the temp is written: the rename must fail
  // and the temp must go away.
  auto w = AtomicFileWriter::Create(dir / "target");
  ASSERT_TRUE(w.ok()) << w.status();
  ASSERT_TRUE(w->Write(std::vector<uint8_t>{1, 2}).ok());
  std::filesystem::create_directory(dir / "target");
  WriteAll(dir / "target/keep", {9});
  const absl::Status st = w->Commit();
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("cannot rename"), std::string::npos) << st;
  EXPECT_EQ(Listing(dir.path()), std::vector<std::string>{"target"});
  EXPECT_EQ(Listing(dir / "target"), std::vector<std::string>{"keep"});
}

TEST(AtomicFile, ADirectoryOutputIsRefusedBeforeAnyTemp) {
  TempDir dir;
  std::filesystem::create_directory(dir / "target");
  WriteAll(dir / "target/keep", {9});
  const absl::Status st = WriteFileAtomic(dir / "target", std::vector<uint8_t>{1, 2});
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("output path is a directory"), std::string::npos) << st;
  EXPECT_EQ(Listing(dir.path()), std::vector<std::string>{"target"});
  EXPECT_EQ(Listing(dir / "target"), std::vector<std::string>{"keep"});
}

TEST(AtomicFile, MissingDirectoryFailsCleanly) {
  TempDir dir;
  const absl::Status st = WriteFileAtomic(dir / "no/such/dir/out.bin", std::vector<uint8_t>{1});
  ASSERT_FALSE(st.ok());
  EXPECT_TRUE(Listing(dir.path()).empty());
}

TEST(AtomicFile, CommitReplacesTarget) {
  TempDir dir;
  WriteAll(dir / "out.bin", {1, 2, 3});
  ASSERT_TRUE(WriteFileAtomic(dir / "out.bin", std::vector<uint8_t>{4, 5}).ok());
  EXPECT_EQ(ReadAll(dir / "out.bin"), (std::vector<uint8_t>{4, 5}));
  EXPECT_EQ(Listing(dir.path()), std::vector<std::string>{"out.bin"});
}

TEST(Zstd, RoundTripThroughFileBytes) {
  TempDir dir;
  std::vector<uint8_t> data(300000);
  uint32_t s = 1;
  for (auto& b : data) {
    s = s * 1103515245u + 12345u;
    b = uint8_t((s >> 16) % 7);  // compressible but not trivial
  }
  ASSERT_TRUE(WriteFileAtomic(dir / "d.bin.zst", data, 3).ok());
  const std::vector<uint8_t> packed = ReadAll(dir / "d.bin.zst");
  EXPECT_TRUE(IsZstd(packed));
  EXPECT_LT(packed.size(), data.size());
  auto fb = FileBytes::Open(dir / "d.bin.zst");
  ASSERT_TRUE(fb.ok()) << fb.status();
  EXPECT_TRUE(fb->decompressed());
  ASSERT_EQ(fb->size(), data.size());
  EXPECT_EQ(std::memcmp(fb->data(), data.data(), data.size()), 0);
  // Independent oracle: the zstd command-line tool decodes our frame to the same bytes.
  // (Skipped when the tool is not installed: it is not a build dependency.)
  if (testing::Run("command -v zstd").exit_code == 0) {
    auto cli = testing::Run("zstd -q -d -c " + dir / "d.bin.zst" + " > " + dir / "cli.bin");
    ASSERT_EQ(cli.exit_code, 0) << cli.output;
    EXPECT_TRUE(ReadAll(dir / "cli.bin") == data);
  }
  // A plain file is mapped, not copied.
  WriteAll(dir / "plain.bin", data);
  auto plain = FileBytes::Open(dir / "plain.bin");
  ASSERT_TRUE(plain.ok());
  EXPECT_TRUE(plain->mapped());
  EXPECT_FALSE(plain->decompressed());
}

TEST(Zstd, DecompressionBoundAndTruncation) {
  TempDir dir;
  const std::vector<uint8_t> data(1 << 20, 0);
  WriteAll(dir / "z.zst", ZstdCompress(data, 3));
  auto bounded = FileBytes::Open(dir / "z.zst", 1000);
  ASSERT_FALSE(bounded.ok());
  EXPECT_NE(bounded.status().message().find("exceeds the 1000 byte limit"), std::string::npos)
      << bounded.status();
  std::vector<uint8_t> packed = ZstdCompress(std::vector<uint8_t>(ReadAll("/proc/self/exe")), 3);
  packed.resize(packed.size() / 2);
  WriteAll(dir / "t.zst", packed);
  auto truncated = FileBytes::Open(dir / "t.zst");
  ASSERT_FALSE(truncated.ok());
  EXPECT_NE(truncated.status().message().find("zstd frame at offset"), std::string::npos)
      << truncated.status();
}

}  // namespace
}  // namespace cact
