// Helpers shared by the quant tests: running a numpy oracle script and reading its raw
// little-endian outputs.
#pragma once
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <string>
#include <vector>

#include "support/test_support.h"

namespace cact::testing {

// Writes `script` into `dir` and runs it with Debian's python3 (numpy 1.24), cwd = dir.
// Returns true on success; the output is attached to the failure otherwise.
inline bool RunPythonOracle(const TempDir& dir, const std::string& script) {
  const std::string path = dir / "oracle.py";
  std::ofstream(path) << script;
  CommandResult r = Run("cd '" + dir.path() + "' && " + Python() + " oracle.py");
  EXPECT_EQ(r.exit_code, 0) << r.output;
  return r.exit_code == 0;
}

// Reads a raw array written with numpy's tofile().
template <class T>
std::vector<T> ReadRaw(const std::string& path) {
  std::vector<uint8_t> bytes = ReadAll(path);
  std::vector<T> out(bytes.size() / sizeof(T));
  if (!out.empty()) std::memcpy(out.data(), bytes.data(), out.size() * sizeof(T));
  return out;
}

inline uint32_t BitsOf(float f) {
  uint32_t u;
  std::memcpy(&u, &f, 4);
  return u;
}
inline uint64_t BitsOf(double d) {
  uint64_t u;
  std::memcpy(&u, &d, 8);
  return u;
}

}  // namespace cact::testing
