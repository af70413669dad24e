// The cact-inspect commands. Each returns the process exit code:
// 0 success, 1 verification failed / files differ, 2 bad input (one line on stderr).
#pragma once
#include <string>

namespace cact::inspect {

struct Options {
  std::string file, file_b, sha256, tensor, output;
  bool json = false, markdown = false, no_tensors = false, all = false;
};

int RunInfo(const Options& o);
int RunVerify(const Options& o);
int RunDiff(const Options& o);
int RunDump(const Options& o);
int RunTokens(const Options& o);

}  // namespace cact::inspect
