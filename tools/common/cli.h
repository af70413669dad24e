// The tools' CLI11 entry: the --version flag with the common line, and parsing that tells
// the tool to stop on --help, --version (exit 0) or a bad command line (exit 2, after
// CLI11's message). Header-only: the tools link CLI11, the common library does not.
#pragma once
#include <optional>
#include <string_view>
#include <utility>

#include "CLI/CLI.hpp"
#include "tools/common/exit_code.h"
#include "tools/common/version.h"

namespace cact::tools {

inline void AddVersionFlag(CLI::App& app, std::string_view tool) {
  app.set_version_flag("--version", VersionLine(tool), "print the version line and exit");
}

// app.parse(args...); a value is the exit code when the tool should stop now.
template <typename... Args>
std::optional<int> ParseCommandLine(CLI::App& app, Args&&... args) {
  try {
    app.parse(std::forward<Args>(args)...);
  } catch (const CLI::ParseError& e) {
    return app.exit(e) == 0 ? kExitOk : kExitBadInput;
  }
  return std::nullopt;
}

}  // namespace cact::tools
