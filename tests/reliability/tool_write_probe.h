// Runs a tool that writes an output file and interrupts it (SIGKILL while its temp file
// exists, a file-size limit), then checks that the output is the previous bytes or a complete
// valid file: tests/reliability/tool_atomic_write*_test.cc, one per tool.
#pragma once
#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "formats/cact/cact_file.h"
#include "support/test_support.h"

extern char** environ;

namespace cact::reliability {

inline pid_t Spawn(const std::vector<std::string>& argv) {
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
inline bool TempVisible(const std::string& dir, const std::string& output) {
  for (const auto& e : std::filesystem::directory_iterator(dir))
    if (e.path().filename().string().rfind("." + output + ".tmp.", 0) == 0) return true;
  return false;
}

struct KillOutcome {
  bool killed_while_writing = false;  // SIGKILL landed while the temp file existed
  bool finished = false;              // the tool completed before we killed it
};

// Runs `argv` (which writes dir/output); SIGKILLs it as soon as its temp file appears.
inline KillOutcome KillWhenWriting(const std::vector<std::string>& argv, const std::string& dir,
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
inline void ExpectPreviousOrComplete(const std::string& path,
                                     const std::vector<uint8_t>& previous) {
  const std::vector<uint8_t> now = testing::ReadAll(path);
  if (now == previous) return;
  auto f = CactFile::Open(path);
  EXPECT_TRUE(f.ok()) << path << " is neither the previous output nor a valid file: " << f.status();
}

inline void SigkillWhileWriting(const std::vector<std::string>& argv_without_output,
                                const std::string& output) {
  testing::TempDir dir;
  const std::vector<uint8_t> previous = testing::ReadAll(testing::Fixture("odd", "model.cact"));
  int caught = 0;
  for (int attempt = 0; attempt < 8 && caught < 2; ++attempt) {
    testing::WriteAll(dir / output, previous);
    std::vector<std::string> argv = argv_without_output;
    argv.push_back("-o");
    argv.push_back(dir / output);
    KillOutcome k = KillWhenWriting(argv, dir.path(), output);
    if (k.killed_while_writing) {
      ++caught;
      EXPECT_EQ(testing::ReadAll(dir / output), previous)
          << "killed mid-write but the output changed";
    } else {
      ExpectPreviousOrComplete(dir / output, previous);
    }
    for (const auto& e : std::filesystem::directory_iterator(dir.path()))
      std::filesystem::remove(e.path());
  }
  EXPECT_GE(caught, 1) << "never caught the tool while its temp file existed (too fast to kill?)";
}

// A failed output write is an error exit (cact-quant: 1 for output I/O, 2 for bad input),
// never a signal.
inline bool ErrorExit(const testing::CommandResult& r) {
  return r.signal == 0 && (r.exit_code == 1 || r.exit_code == 2);
}

// A file-size limit (EFBIG, as on a full disk, with SIGXFSZ ignored so the tool sees the error).
inline void SizeLimitedWrite(const std::string& command_without_output, const std::string& output) {
  testing::TempDir dir;
  const std::vector<uint8_t> previous(1000, 0x5A);
  testing::WriteAll(dir / output, previous);
  // dash's `ulimit -f` counts 512-byte blocks: 128 = 64 KB.
  auto r = testing::Run("trap '' XFSZ; ulimit -f 128; exec " + command_without_output + " -o " +
                        (dir / output));
  EXPECT_TRUE(ErrorExit(r)) << "exit " << r.exit_code << ", signal " << r.signal << ": "
                            << r.output;
  std::string last = r.output;
  while (!last.empty() && last.back() == '\n') last.pop_back();
  last = last.substr(last.rfind('\n') == std::string::npos ? 0 : last.rfind('\n') + 1);
  EXPECT_NE(last.find(output), std::string::npos)
      << "the error line should name the output: " << last;
  EXPECT_EQ(testing::ReadAll(dir / output), previous) << "the previous output changed";
  for (const auto& e : std::filesystem::directory_iterator(dir.path()))
    EXPECT_EQ(e.path().filename().string(), output) << "left behind: " << e.path();
}

}  // namespace cact::reliability
