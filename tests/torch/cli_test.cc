// cact-torch as a user runs it: the CLI round trip, exit codes, and the Python path
// (tests/torch/edit_and_return.py with Debian's python3-torch) for both fixtures.
#include <gtest/gtest.h>

#include <filesystem>

#include "torch_test_util.h"

namespace cact::testing {
namespace {

bool ToolBuilt() {
  if (std::filesystem::exists(Tool("cact-torch"))) return true;
  ADD_FAILURE() << "build the cact-torch target first (" << Tool("cact-torch") << ")";
  return false;
}

TEST(CactTorchCli, ExportImportRoundTripAndRun) {
  if (!ToolBuilt()) return;
  TempDir dir;
  const std::string src = Fixture("odd", "model.cact");
  CommandResult ex =
      cact::testing::Run(Tool("cact-torch") + " export " + src + " -o " + (dir / "m.pt"));
  ASSERT_EQ(ex.exit_code, 0) << ex.output;
  CommandResult im = cact::testing::Run(Tool("cact-torch") + " import " + (dir / "m.pt") + " -o " +
                                        (dir / "back.cact"));
  ASSERT_EQ(im.exit_code, 0) << im.output;
  EXPECT_NE(im.output.find("kept 96, re-encoded 0, requantized 0"), std::string::npos) << im.output;
  EXPECT_EQ(ReadAll(dir / "back.cact"), ReadAll(src));

  CommandResult st = cact::testing::Run(Tool("cact-torch") + " export " + src +
                                        " --format safetensors -o " + (dir / "st"));
  ASSERT_EQ(st.exit_code, 0) << st.output;
  CommandResult sti = cact::testing::Run(Tool("cact-torch") + " import " + (dir / "st") +
                                         " --base " + src + " -o " + (dir / "st.cact"));
  ASSERT_EQ(sti.exit_code, 0) << sti.output;
  EXPECT_EQ(ReadAll(dir / "st.cact"), ReadAll(src));

  // run: logits of the s0 prefill through libtorch from the CLI
  std::string toks;
  for (int64_t t : FixtureTokens64("odd", "s0"))
    toks += (toks.empty() ? "" : ",") + std::to_string(t);
  CommandResult run = cact::testing::Run(Tool("cact-torch") + " run " + (dir / "m.pt") +
                                         " --tokens " + toks + " --logits " + (dir / "l.npy"));
  ASSERT_EQ(run.exit_code, 0) << run.output;
  EXPECT_NE(run.output.find("tokens/s"), std::string::npos);
  EXPECT_LE(MaxRelErr(NpyData(dir / "l.npy"), NpyData(Fixture("odd", "logits_s0.npy"))), 1e-4);
}

// The --version line of every tool (tests/cli/version_cli_test.cc has the others).
TEST(CactTorchCli, VersionIsOneLine) {
  if (!ToolBuilt()) return;
  CommandResult r = cact::testing::Run(Tool("cact-torch") + " --version");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_EQ(r.output.rfind("cact-torch ", 0), 0u) << r.output;
  EXPECT_NE(r.output.find("; kernels built: scalar"), std::string::npos) << r.output;
  EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << r.output;
}

TEST(CactTorchCli, BadInputsExitTwoWithOneLine) {
  if (!ToolBuilt()) return;
  TempDir dir;
  WriteAll(dir / "junk.cact", std::vector<uint8_t>(200, 7));
  for (const std::string& cmd :
       {" export " + (dir / "junk.cact") + " -o " + (dir / "x.pt"),
        " export " + (dir / "missing.cact") + " -o " + (dir / "x.pt"),
        " import " + (dir / "junk.cact") + " -o " + (dir / "x.cact"),
        " import " + Fixture("tiny", "weights.safetensors") + " -o " + (dir / "x.cact"),
        " import " + Fixture("tiny", "model.cact") + " -o " + (dir / "x.cact") +
            " --scheme default=7"}) {
    CommandResult r = cact::testing::Run(Tool("cact-torch") + cmd);
    EXPECT_EQ(r.exit_code, 2) << cmd << "\n" << r.output;
    EXPECT_EQ(std::count(r.output.begin(), r.output.end(), '\n'), 1) << cmd << "\n" << r.output;
  }
  EXPECT_FALSE(std::filesystem::exists(dir / "x.pt"));
  EXPECT_FALSE(std::filesystem::exists(dir / "x.cact"));
}

class PythonEditAndReturn : public ::testing::TestWithParam<std::string> {};

TEST_P(PythonEditAndReturn, LoadRunEditImport) {
  if (!ToolBuilt()) return;
  TempDir dir;
  CommandResult r = cact::testing::Run(
      Python() + " " + CACT_SOURCE_DIR + "/tests/torch/edit_and_return.py --bin " + CACT_BIN_DIR +
      " --fixture " + FixturesDir() + "/" + GetParam() + " --work " + dir.path());
  EXPECT_EQ(r.exit_code, 0) << r.output;
  EXPECT_NE(r.output.find("0 failure(s)"), std::string::npos) << r.output;
}

INSTANTIATE_TEST_SUITE_P(Fixtures, PythonEditAndReturn, ::testing::ValuesIn(FixtureCases()));

}  // namespace
}  // namespace cact::testing
