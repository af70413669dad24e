// Shared helpers for the test executables: fixture paths, temp dirs, running tools.
#pragma once
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <array>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/escaping.h"

namespace cact::testing {

inline std::string FixturesDir() { return CACT_FIXTURES_DIR; }
inline std::string Fixture(const std::string& kase, const std::string& file) {
  return FixturesDir() + "/" + kase + "/" + file;
}
inline const std::vector<std::string>& FixtureCases() {
  static const std::vector<std::string> cases = {"tiny", "odd"};
  return cases;
}
inline std::string Tool(const std::string& name) { return std::string(CACT_BIN_DIR) + "/" + name; }
inline std::string Python() { return CACT_PYTHON; }
inline std::string QuantTool() { return Tool("cact-quant"); }
// The trained reference model and its tools (docs/reference-model).
inline std::string ReferenceModel() {
  return std::string(CACT_SOURCE_DIR) + "/docs/reference-model/reference.cact";
}
inline std::string ReferenceTools() {
  return std::string(CACT_SOURCE_DIR) + "/docs/reference-model/tools.json";
}

// Whether the built tool `name` is there to run.
inline bool ToolBuilt(const std::string& name) { return access(Tool(name).c_str(), X_OK) == 0; }

// A fresh directory under the build's temp area, removed at destruction.
class TempDir {
 public:
  TempDir() {
    std::string tmpl = (std::filesystem::temp_directory_path() / "cact_test_XXXXXX").string();
    std::vector<char> buf(tmpl.begin(), tmpl.end());
    buf.push_back('\0');
    path_ = mkdtemp(buf.data());
  }
  ~TempDir() {
    std::error_code ec;
    std::filesystem::remove_all(path_, ec);
  }
  std::string path() const { return path_; }
  std::string operator/(const std::string& f) const { return path_ + "/" + f; }

 private:
  std::string path_;
};

struct CommandResult {
  int exit_code = -1;  // -1 when killed by a signal
  int signal = 0;
  std::string output;  // stdout and stderr interleaved
};

// Newline characters in `s`.
inline size_t Newlines(const std::string& s) {
  return size_t(std::count(s.begin(), s.end(), '\n'));
}
// Lines of a command's output (a last line without '\n' counts).
inline size_t CountLines(const std::string& s) {
  return size_t(std::count(s.begin(), s.end(), '\n')) + (!s.empty() && s.back() != '\n');
}

// Runs `cmd` through /bin/sh, capturing stdout+stderr.
inline CommandResult Run(const std::string& cmd) {
  CommandResult r;
  FILE* p = popen((cmd + " 2>&1").c_str(), "r");
  if (!p) return r;
  std::array<char, 4096> buf;
  size_t n;
  while ((n = fread(buf.data(), 1, buf.size(), p)) > 0) r.output.append(buf.data(), n);
  int st = pclose(p);
  if (WIFEXITED(st))
    r.exit_code = WEXITSTATUS(st);
  else if (WIFSIGNALED(st))
    r.signal = WTERMSIG(st);
  return r;
}

// Bytes as lower-case hex.
inline std::string Hex(std::string_view bytes) {
  return absl::BytesToHexString(absl::string_view(bytes.data(), bytes.size()));
}
// A file's bytes as text ("" when unreadable).
inline std::string ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}
inline std::vector<uint8_t> ReadAll(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::vector<uint8_t>((std::istreambuf_iterator<char>(f)),
                              std::istreambuf_iterator<char>());
}
inline void WriteAll(const std::string& path, const std::vector<uint8_t>& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}
// The names in a directory, sorted.
inline std::vector<std::string> Listing(const std::string& dir) {
  std::vector<std::string> names;
  for (const auto& e : std::filesystem::directory_iterator(dir))
    names.push_back(e.path().filename());
  std::sort(names.begin(), names.end());
  return names;
}

}  // namespace cact::testing

// Fails the calling test when a tool it runs is missing. Test binaries depend on the tools
// they run (tests/CMakeLists.txt), so a missing tool is a broken build, never a skip.
#define ASSERT_TOOL_BUILT(name)                 \
  ASSERT_TRUE(::cact::testing::ToolBuilt(name)) \
      << (name) << " is not built: " << ::cact::testing::Tool(name)
