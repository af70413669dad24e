// The tools' outputs are written atomically: `cact-quant` killed with SIGKILL while writing
// leaves the previous output intact, and a full disk or a file-size limit gives an error exit
// with one line naming the output, no partial file left (cact-torch import:
// tool_atomic_write_torch_test.cc).
#include <signal.h>
#include <sys/wait.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <thread>

#include "reliability/tool_write_probe.h"
#include "support/test_support.h"

namespace cact {
namespace {

namespace fs = std::filesystem;
using reliability::ExpectPreviousOrComplete;
using reliability::SigkillWhileWriting;
using reliability::SizeLimitedWrite;
using reliability::Spawn;
using testing::Fixture;
using testing::ReadAll;
using testing::TempDir;
using testing::Tool;
using testing::WriteAll;

TEST(ToolAtomicWrites, CactQuantSynthKilledWhileWritingKeepsThePreviousOutput) {
  ASSERT_TOOL_BUILT("cact-quant");
  SigkillWhileWriting({Tool("cact-quant"), "synth", "--geometry", "small", "-q"}, "out.cact");
}

TEST(ToolAtomicWrites, CactQuantBuildKilledWhileWritingKeepsThePreviousOutput) {
  ASSERT_TOOL_BUILT("cact-quant");
  SigkillWhileWriting(
      {Tool("cact-quant"), "build", "--weights", Fixture("tiny", "weights.safetensors"), "--base",
       Fixture("tiny", "model.cact"), "--force-requantize", "-q"},
      "out.cact");
}

// Kills at a spread of delays (whatever phase the tool is in): the output is always the
// previous file or a complete valid one.
TEST(ToolAtomicWrites, CactQuantKilledAtAnyMomentNeverLeavesAPartialFile) {
  ASSERT_TOOL_BUILT("cact-quant");
  TempDir dir;
  const std::vector<uint8_t> previous = ReadAll(Fixture("odd", "model.cact"));
  for (int delay_ms : {0, 5, 20, 60, 150, 300, 500, 800}) {
    WriteAll(dir / "out.cact", previous);
    const pid_t pid =
        Spawn({Tool("cact-quant"), "synth", "--geometry", "small", "-q", "-o", dir / "out.cact"});
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

TEST(ToolAtomicWrites, CactQuantOnASizeLimitFailsCleanlyWithNoPartialFile) {
  ASSERT_TOOL_BUILT("cact-quant");
  SizeLimitedWrite(Tool("cact-quant") + " synth --geometry small -q", "out.cact");
  SizeLimitedWrite(Tool("cact-quant") + " synth --geometry small -q", "out.cact.zst");
}

// A really full filesystem (ENOSPC): a 64 KB tmpfs in a private mount namespace (util-linux
// unshare).
TEST(ToolAtomicWrites, CactQuantOnAFullDiskFailsCleanlyWithNoPartialFile) {
  ASSERT_TOOL_BUILT("cact-quant");
  TempDir dir;
  fs::create_directory(dir / "mnt");
  auto probe =
      testing::Run("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs " + (dir / "mnt") + "'");
  if (probe.exit_code != 0)
    GTEST_SKIP() << "this machine does not let us mount a tmpfs (needs root): " << probe.output;
  const std::string out = dir / "mnt/out.cact";
  auto r = testing::Run("unshare -m sh -c 'mount -t tmpfs -o size=64k tmpfs " + (dir / "mnt") +
                        " && printf old > " + out + " && " + Tool("cact-quant") +
                        " synth --geometry small -q -o " + out + "; echo \"rc=$?\"; cat " + out +
                        "; echo; ls -A " + (dir / "mnt") + "'");
  EXPECT_TRUE(r.output.find("rc=1\nold\nout.cact\n") != std::string::npos ||
              r.output.find("rc=2\nold\nout.cact\n") != std::string::npos)
      << "expected an error exit, the previous content and no other file:\n"
      << r.output;
  EXPECT_NE(r.output.find("No space left on device"), std::string::npos) << r.output;
}

}  // namespace
}  // namespace cact
