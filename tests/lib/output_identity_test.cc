// Outputs never replace inputs, and what is not a regular file is written through.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <filesystem>
#include <thread>

#include "lib/atomic_file.h"
#include "lib/file_bytes.h"
#include "lib/file_identity.h"
#include "support/test_support.h"

namespace cact {
namespace {

using testing::ReadAll;
using testing::TempDir;
using testing::WriteAll;

TEST(OutputIdentity, AnInputUnderAnyNameIsRefused) {
  TempDir dir;
  WriteAll(dir / "in.bin", {1, 2, 3});
  std::filesystem::create_hard_link(dir / "in.bin", dir / "hard.bin");
  std::filesystem::create_symlink(dir / "in.bin", dir / "soft.bin");
  const std::vector<std::string> inputs = {dir / "in.bin"};
  for (const std::string& out :
       {dir / "in.bin", dir / "hard.bin", dir / "soft.bin", dir.path() + "/./in.bin"}) {
    const absl::Status st = CheckOutputIsNotInput(out, inputs, "-o");
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << out;
    EXPECT_NE(st.message().find("-o is an input of this command"), std::string::npos) << st;
  }
  EXPECT_TRUE(CheckOutputIsNotInput(dir / "new.bin", inputs).ok());
  WriteAll(dir / "other.bin", {4});
  EXPECT_TRUE(CheckOutputIsNotInput(dir / "other.bin", inputs).ok());
  EXPECT_TRUE(CheckOutputIsNotInput("-", inputs).ok());
}

TEST(OutputIdentity, TheWriterRefusesAFileThisProcessRead) {
  RecordInputs(true);
  TempDir dir;
  WriteAll(dir / "read.bin", {1, 2, 3});
  std::filesystem::create_hard_link(dir / "read.bin", dir / "link.bin");
  {
    absl::StatusOr<FileBytes> in = FileBytes::Open(dir / "read.bin", 1024);
    ASSERT_TRUE(in.ok()) << in.status();
  }
  for (const std::string& out : {dir / "read.bin", dir / "link.bin"}) {
    const absl::Status st = WriteFileAtomic(out, std::vector<uint8_t>{9});
    EXPECT_EQ(st.code(), absl::StatusCode::kFailedPrecondition) << out;
  }
  EXPECT_EQ(ReadAll(dir / "read.bin"), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_EQ(testing::Listing(dir.path()), (std::vector<std::string>{"link.bin", "read.bin"}));
  RecordInputs(false);
}

TEST(OutputIdentity, ALibraryUserMayWriteBackWhatItRead) {
  TempDir dir;
  WriteAll(dir / "edit.bin", {1});
  { ASSERT_TRUE(FileBytes::Open(dir / "edit.bin", 16).ok()); }
  ASSERT_TRUE(WriteFileAtomic(dir / "edit.bin", std::vector<uint8_t>{2}).ok());
  EXPECT_EQ(ReadAll(dir / "edit.bin"), (std::vector<uint8_t>{2}));
}

TEST(OutputIdentity, ADeletedInputsReusedInodeIsNotAnInput) {
  RecordInputs(true);
  TempDir dir;
  // Read, delete, then write new files until one gets the old inode number (usually the
  // first): the record of a file that is gone must not refuse them.
  WriteAll(dir / "gone.bin", {1});
  struct stat old {};
  ASSERT_EQ(::stat((dir / "gone.bin").c_str(), &old), 0);
  { ASSERT_TRUE(FileBytes::Open(dir / "gone.bin", 16).ok()); }
  std::filesystem::remove(dir / "gone.bin");
  bool reused = false;
  for (int i = 0; i < 64 && !reused; ++i) {
    const std::string p = dir / ("new" + std::to_string(i));
    WriteAll(p, {2});
    struct stat st {};
    ASSERT_EQ(::stat(p.c_str(), &st), 0);
    reused = st.st_ino == old.st_ino;
    EXPECT_TRUE(WriteFileAtomic(p, std::vector<uint8_t>{3}).ok()) << p;
  }
  RecordInputs(false);
  if (!reused) GTEST_SKIP() << "the file system did not reuse the inode number";
}

TEST(PassThroughOutput, DevNullStaysACharacterDevice) {
  ASSERT_TRUE(std::filesystem::is_character_file("/dev/null"));
  ASSERT_TRUE(WriteFileAtomic("/dev/null", std::vector<uint8_t>(100000, 7)).ok());
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/null"));
}

TEST(PassThroughOutput, AFullDeviceIsAnErrorNamingIt) {
  ASSERT_TRUE(std::filesystem::is_character_file("/dev/full"));
  const absl::Status st = WriteFileAtomic("/dev/full", std::vector<uint8_t>(100000, 7));
  ASSERT_FALSE(st.ok());
  EXPECT_NE(st.message().find("/dev/full"), std::string::npos) << st;
  EXPECT_TRUE(std::filesystem::is_character_file("/dev/full"));
}

TEST(PassThroughOutput, AFifoIsWrittenThroughNotReplaced) {
  TempDir dir;
  const std::string fifo = dir / "pipe";
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  std::vector<uint8_t> got;
  std::thread reader([&] {
    const int fd = ::open(fifo.c_str(), O_RDONLY);
    uint8_t buf[4096];
    for (ssize_t n; (n = ::read(fd, buf, sizeof buf)) > 0;) got.insert(got.end(), buf, buf + n);
    ::close(fd);
  });
  const std::vector<uint8_t> bytes(70000, 5);
  const absl::Status st = WriteFileAtomic(fifo, bytes);
  reader.join();
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(got, bytes);
  struct stat s {};
  ASSERT_EQ(::lstat(fifo.c_str(), &s), 0);
  EXPECT_TRUE(S_ISFIFO(s.st_mode));
  EXPECT_EQ(testing::Listing(dir.path()), std::vector<std::string>{"pipe"});
}

TEST(PassThroughOutput, DashIsStandardOutput) {
  TempDir dir;
  // Standard output pointed at a file for the length of the write.
  fflush(stdout);
  const int saved = ::dup(STDOUT_FILENO);
  const int fd = ::open((dir / "stdout.bin").c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  ASSERT_GE(fd, 0);
  ::dup2(fd, STDOUT_FILENO);
  ::close(fd);
  const absl::Status st = WriteFileAtomic("-", std::vector<uint8_t>{1, 2, 3});
  ::dup2(saved, STDOUT_FILENO);
  ::close(saved);
  ASSERT_TRUE(st.ok()) << st;
  EXPECT_EQ(ReadAll(dir / "stdout.bin"), (std::vector<uint8_t>{1, 2, 3}));
  EXPECT_FALSE(std::filesystem::exists("-"));
}

}  // namespace
}  // namespace cact
