#include "tools/common/exit_code.h"

#include <cstdio>
#include <string>

namespace cact::tools {

int ExitCode(const absl::Status& status) {
  if (status.ok()) return kExitOk;
  return status.code() == absl::StatusCode::kInternal ? kExitCheckFailed : kExitBadInput;
}

void PrintFailure(std::string_view tool, const absl::Status& status) {
  std::fprintf(stderr, "%s: %s\n", std::string(tool).c_str(),
               std::string(status.message()).c_str());
}

int ReportFailure(std::string_view tool, const absl::Status& status) {
  PrintFailure(tool, status);
  return ExitCode(status);
}

}  // namespace cact::tools
