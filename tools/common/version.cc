#include "tools/common/version.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/kernels/isa.h"
#include "tools/common/build_info.h"

namespace cact::tools {

std::string VersionLine(std::string_view tool) {
  std::string runnable;
  for (kernels::Isa isa : kernels::kAllIsas)
    if (kernels::IsaSupported(isa))
      absl::StrAppend(&runnable, runnable.empty() ? "" : " ", kernels::IsaName(isa));
  return absl::StrFormat("%s %s (commit %s, %s; kernels built: %s; this CPU runs: %s)", tool,
                         kBuildVersion, kBuildCommit, kBuildType, kBuildKernels, runnable);
}

std::string BuildId() { return absl::StrFormat("%s commit %s", kBuildVersion, kBuildCommit); }

bool HandleVersionArgument(std::string_view tool, int argc, char** argv) {
  if (argc != 2 || std::string_view(argv[1]) != "--version") return false;
  std::printf("%s\n", VersionLine(tool).c_str());
  return true;
}

}  // namespace cact::tools
