// The one `--version` line of every tool:
//   cact-run 0.1.0 (commit 1a2b3c4, Release; kernels built: scalar avx2 ...; this CPU runs: scalar
//   avx2)
// The version is the CMake project version, the commit is the checkout's at configure time
// ("unknown" outside a git checkout), the built kernels are the ISAs the kernel table was
// compiled with, and the CPU's are those of them this machine can run.
#pragma once
#include <string>
#include <string_view>

namespace cact::tools {

std::string VersionLine(std::string_view tool);
// "0.1.0 commit 1a2b3c4d5e6f": what files that depend on this build's numerics (the prompt
// cache) record, so another build's file is rebuilt rather than trusted.
std::string BuildId();

// True when argv holds exactly one argument, `--version`: prints VersionLine and the tool
// returns 0. For a hand-written parser; CLI11 tools use CLI::App::set_version_flag.
bool HandleVersionArgument(std::string_view tool, int argc, char** argv);

}  // namespace cact::tools
