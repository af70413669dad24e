// How every tool turns a status into its exit code, and prints the failure:
//   0  success;
//   1  a check the user asked for failed (validation, verify, diff), or an internal error
//      (absl::StatusCode::kInternal: a bug or an environment failure, not the input);
//   2  bad input: every other error (unreadable or damaged file, bad option value, ...).
// A tool may document a narrower contract (cact-torch exits 2 on every error) and then
// prints with PrintFailure and returns its own code.
#pragma once
#include <string_view>

#include "absl/status/status.h"

namespace cact::tools {

inline constexpr int kExitOk = 0, kExitCheckFailed = 1, kExitBadInput = 2;

int ExitCode(const absl::Status& status);

// Prints the failure as one line, "TOOL: message", on stderr.
void PrintFailure(std::string_view tool, const absl::Status& status);
// PrintFailure, then ExitCode(status).
int ReportFailure(std::string_view tool, const absl::Status& status);

}  // namespace cact::tools
