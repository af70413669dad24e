// Every tool answers `--version` with the one line of tools/common/version.h: the project
// version, the commit, the build type, the kernels compiled in and those this CPU runs.
#include <regex>
#include <string>

#include "gtest/gtest.h"
#include "support/test_support.h"

namespace cact {
namespace {

// "TOOL 1.2.3 (commit C, TYPE; kernels built: scalar ...; this CPU runs: scalar ...)\n"
void ExpectVersionLine(const std::string& tool, const std::string& args) {
  const testing::CommandResult r = testing::Run(testing::Tool(tool) + " " + args);
  EXPECT_EQ(r.exit_code, 0) << args << "\n" << r.output;
  const std::regex line(tool + R"( \d+\.\d+\.\d+ \(commit ([0-9a-f]{7,40}|unknown), [^;]+; )"
                               R"(kernels built: scalar( \w+)*; this CPU runs: scalar( \w+)*\)\n)");
  EXPECT_TRUE(std::regex_match(r.output, line)) << args << "\n" << r.output;
}

TEST(VersionCli, EveryToolPrintsOneVersionLine) {
  ExpectVersionLine("cact-inspect", "--version");
  ExpectVersionLine("cact-quant", "--version");
  ExpectVersionLine("cact-run", "--version");
  ExpectVersionLine("cact-run", "bench --version");
  ExpectVersionLine("cact-kernel-bench", "--version");
}

}  // namespace
}  // namespace cact
