// The cact-inspect commands. Each returns the process exit code:
// 0 success, 1 verification failed / files differ, 2 bad input (one line on stderr).
#pragma once
#include <string>

#include "absl/status/status.h"
#include "lib/file_bytes.h"

namespace cact::inspect {

struct Options {
  std::string file, file_b, sha256, tensor, output;
  bool json = false, markdown = false, no_tensors = false, all = false, tensors = false;
};

// Prints "cact-inspect: message" (tools/common/exit_code.h) and returns 2: every error of
// these commands is bad input.
int Fail(const absl::Status& status);

int RunInfo(const Options& o);
// RunInfo for an official training pickle (checkpoint or LoRA adapter).
int RunPickleInfo(const Options& o, FileBytes bytes);
int RunVerify(const Options& o);
int RunDiff(const Options& o);
int RunDump(const Options& o);
int RunTokens(const Options& o);

}  // namespace cact::inspect
