// `cact-torch import` writes its .cact atomically like cact-quant (tool_atomic_write_test.cc):
// killed with SIGKILL while writing, or on a file-size limit, it leaves the previous output.
// Built only with CACT_WITH_TORCH (tests/CMakeLists.txt).
#include <gtest/gtest.h>

#include "reliability/tool_write_probe.h"
#include "support/test_support.h"

namespace cact {
namespace {

using reliability::SigkillWhileWriting;
using reliability::SizeLimitedWrite;
using testing::Fixture;
using testing::TempDir;
using testing::Tool;

TEST(ToolAtomicWrites, CactTorchImportKilledOrOnASizeLimitKeepsThePreviousOutput) {
  ASSERT_TOOL_BUILT("cact-torch");
  TempDir pt;
  auto exported = testing::Run(Tool("cact-torch") + " export " + Fixture("tiny", "model.cact") +
                               " -o " + (pt / "m.pt"));
  ASSERT_EQ(exported.exit_code, 0) << exported.output;
  SigkillWhileWriting({Tool("cact-torch"), "import", pt / "m.pt", "--force-requantize"},
                      "out.cact");
  SizeLimitedWrite(Tool("cact-torch") + " import " + (pt / "m.pt"), "out.cact");
}

}  // namespace
}  // namespace cact
