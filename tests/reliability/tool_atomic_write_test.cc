// The tools' outputs are written atomically: `cact-quant` (and `cact-torch import` when built)
// killed with SIGKILL while writing leaves the previous output intact, and a full disk or a
// file-size limit gives an error exit with one line naming the output, no partial file left.
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <thread>

#include "formats/cact/cact_file.h"
#include "support/test_support.h"

extern char** environ;

namespace cact {
namespace {

namespace fs = std::filesystem;
using testing::Fixture;
using testing::ReadAll;
using testing::TempDir;
using testing::Tool;
using testing::WriteAll;

bool Built(const std::string& tool) { return access(Tool(tool).c_str(), X_OK) == 0; }

pid_t Spawn(const std::vector<std::string>& argv) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, "/dev/null", O_WRONLY, 0);
  posix_spawn_file_actions_addopen(&fa, 2, "/dev/null", O_WRONLY, 0);
  pid_t pid = -1;
  if (posix_spawn(&pid, args[0], &fa, nullptr, args.data(), environ) != 0) pid = -1;
  posix_spawn_file_actions_destroy(&fa);
  return pid;
}

// A hidden temp file of `output` exists in `dir` (".<name>.tmp.XXXXXX", lib/atomic_file.h).
bool TempVisible(const std::string& dir, const std::string& output) {
  for (const auto& e : fs::directory_iterator(dir))
    if (e.path().filename().string().rfind("." + output + ".tmp.", 0) == 0) return true;
  return false;
}

struct KillOutcome {
  bool killed_while_writing = false;  // SIGKILL landed while the temp file existed
  bool finished = false;              // the tool completed before we killed it
};

// Runs `argv` (which writes dir/output); SIGKILLs it as soon as its temp file appears.
KillOutcome KillWhenWriting(const std::vector<std::string>& argv, const std::string& dir,
                            const std::string& output) {
  KillOutcome k;
  const pid_t pid = Spawn(argv);
  if (pid < 0) return k;
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
  int st = 0;
  while (std::chrono::steady_clock::now() < deadline) {
    if (TempVisible(dir, output)) {
      kill(pid, SIGKILL);
      waitpid(pid, &st, 0);
      k.killed_while_writing = WIFSIGNALED(st);
      k.finished = WIFEXITED(st);
      return k;
    }
    if (waitpid(pid, &st, WNOHANG) == pid) {
      k.finished = true;
      return k;
    }
    std::this_thread::sleep_for(std::chrono::microseconds(100));
  }
  kill(pid, SIGKILL);
  waitpid(pid, &st, 0);
  return k;
}

// After any interruption the output is the previous bytes, or (if the rename happened) a
// complete file that validates; never anything else.
void ExpectPreviousOrComplete(const std::string& path, const std::vector<uint8_t>& previous) {
  const std::vector<uint8_t> now = ReadAll(path);
  if (now == previous) return;
  auto f = CactFile::Open(path);
  EXPECT_TRUE(f.ok()) << path << " is neither the previous output nor a valid file: " << f.status();
}

void SigkillWhileWriting(const std::vector<std::string>& argv_without_output, const std::string& output) {
  TempDir dir;
  const std::vector<uint8_t> previous = ReadAll(Fixture("odd", "model.cact"));
  int caught = 0;
  for (int attempt = 0; attempt < 8 && caught < 2; ++attempt) {
    WriteAll(dir / output, previous);
    std::vector<std::string> argv = argv_without_output;
    argv.push_back("-o");
    argv.push_back(dir / output);
    KillOutcome k = KillWhenWriting(argv, dir.path(), output);
    if (k.killed_while_writing) {
      ++caught;
      EXPECT_EQ(ReadAll(dir / output), previous) << "killed mid-write but the output changed";
    } else {
      ExpectPreviousOrComplete(dir / output, previous);
    }
    for (const auto& e : fs::directory_iterator(dir.path())) fs::remove(e.path());
  }
  EXPECT_GE(caught, 1) << "never caught the tool while its temp file existed (too fast to kill?)";
}

TEST(ToolAtomicWrites, CactQuantSynthKilledWhileWritingKeepsThePreviousOutput) {
  if (!Built("cact-quant")) GTEST_SKIP() << "cact-quant not built";
  SigkillWhileWriting({Tool("cact-quant"), "synth", "--preset", "small", "-q"}, "out.cact");
}

TEST(ToolAtomicWrites, CactQuantBuildKilledWhileWritingKeepsThePreviousOutput) {
  if (!Built("cact-quant")) GTEST_SKIP() << "cact-quant not built";
  SigkillWhileWriting({Tool("cact-quant"), "build", "--weights", Fixture("tiny", "weights.safetensors"),
                       "--base", Fixture("tiny", "model.cact"), "--force-requantize", "-q"},
                      "out.cact");
}

// Kills at a spread of delays (whatever phase the tool is in): the output is always the
// previous file or a complete valid one.
TEST(ToolAtomicWrites, CactQuantKilledAtAnyMomentNeverLeavesAPartialFile) {
  if (!Built("cact-quant")) GTEST_SKIP() << "cact-quant not built";
  TempDir dir;
  const std::vector<uint8_t> previous = ReadAll(Fixture("odd", "model.cact"));
  for (int delay_ms : {0, 5, 20, 60, 150, 300, 500, 800}) {
    WriteAll(dir / "out.cact", previous);
    const pid_t pid = Spawn({Tool("cact-quant"), "synth", "--preset", "small", "-q", "-o", dir / "out.cact"});
    ASSERT_GT(pid, 0);
    std::this_thread::sleep_for(std::chrono::milliseconds(delay_ms));
    kill(pid, SIGKILL);
    int st = 0;
    waitpid(pid, &st, 0);
    ExpectPreviousOrComplete(dir / "out.cact", previous);
    for (const auto& e : fs::directory_iterator(dir.path())) {
      if (e.path().filename() != "out.cact") {
        EXPECT_EQ(e.path().filename().string().rfind(".out.cact.tmp.", 0), 0u) << e.path();
      }
    }
  }
}

// A failed output write is an error exit (cact-quant: 1 for output I/O, 2 for bad input),
// never a signal.
bool ErrorExit(const testing::CommandResult& r) { return r.signal == 0 && (r.exit_code == 1 || r.exit_code == 2); }

// A file-size limit (EFBIG, as on a full disk, with SIGXFSZ ignored so the tool sees the error).
void SizeLimitedWrite(const std::string& command_without_output, const std::string& output) {
  TempDir dir;
  const std::vector<uint8_t> previous(1000, 0x5A);
  WriteAll(dir / output, previous);
  // dash's `ulimit -f` counts 512-byte blocks: 128 = 64 KB.
  auto r = testing::Run("trap '' XFSZ; ulimit -f 128; exec " + command_without_output + " -o " + (dir / output));
  EXPECT_TRUE(ErrorExit(r)) << "exit " << r.exit_code << ", signal " << r.signal << ": " << r.output;
  std::string last = r.output;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  EXPECT_NE(last.find(output), std::string::npos) << "the error line should name the output: " << last;
  EXPECT_EQ(ReadAll(dir / output), previous) << "the previous output changed";
  for (const auto& e : fs::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string(), output) << "left behind: " << e.path();
}

TEST(ToolAtomicWrites, CactQuantOnASizeLimitFailsCleanlyWithNoPartialFile) {
  if (!Built("cact-quant")) GTEST_SKIP() << "cact-quant not built";
  SizeLimitedWrite(Tool("cact-quant") + " synth --preset small -q", "out.cact");
  SizeLimitedWrite(Tool("cact-quant") + " synth --preset small -q", "out.cact.zst");
}

// A really full filesystem (ENOSPC): a 64 KB tmpfs in a private mount namespace (util-linux unshare).
TEST(ToolAtomicWrites, CactQuantOnAFullDiskFailsCleanlyWithNoPartialFile) {
  if (!Built("cact-quant")) GTEST_SKIP() << "cact-quant not built";
  TempDir dir;
  fs::create_directory(dir / "mnt");
  auto probe = testing::Run("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs " + (dir / "mnt") + "'");
  if (probe.exit_code != 0) GTEST_SKIP() << "cannot mount a tmpfs (needs root): " << probe.output;
  const std::string out = dir / "mnt/out.cact";
  auto r = testing::Run("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs " + (dir / "mnt") + " && printf old > " + out +
               " && " + Tool("cact-quant") + " synth --preset small -q -o " + out +
               "; echo \"rc=$?\"; cat " + out + "; echo; ls -A " + (dir / "mnt") + "'");
  EXPECT_TRUE(r.output.find("rc=1\nold\nout.cact\n") != std::string::npos ||
              r.output.find("rc=2\nold\nout.cact\n") != std::string::npos)
      << "expected an error exit, the previous content and no other file:\n" << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
}

// cact-torch import writes a .cact the same way.
TEST(ToolAtomicWrites, CactTorchImportKilledOrOnASizeLimitKeepsThePreviousOutput) {
  if (!Built("cact-torch")) GTEST_SKIP() << "cact-torch not built (CACT_WITH_TORCH=OFF)";
  TempDir pt;
  auto exported = testing::Run(Tool("cact-torch") + " export " + Fixture("tiny", "model.cact") + " -o " + (pt / "m.pt"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  SigkillWhileWriting({Tool("cact-torch"), "import", pt / "m.pt", "--force-requantize"}, "out.cact");
  SizeLimitedWrite(Tool("cact-torch") + " import " + (pt / "m.pt"), "out.cact");
}

}  // namespace
}  // namespace cact
