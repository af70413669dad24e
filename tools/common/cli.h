// The command-line contract every tool keeps (docs/cact-common.md): usage lines name the
// program, --help shows every default, --version prints the common line, a bad command line
// is one line "TOOL: message" with exit 2, and a failed write to standard output is an error.
// Header-only: the tools link CLI11, the common library does not.
#pragma once
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>

#include "CLI/CLI.hpp"
#include "lib/file_identity.h"
#include "tools/common/exit_code.h"
#include "tools/common/stdout_check.h"
#include "tools/common/version.h"

namespace cact::tools {

// `program` is what usage lines show ("cact-run", "cact-run bench"); `tool` prefixes errors.
// Call before adding options: subcommands copy the option defaults when they are added.
inline void SetUpTool(CLI::App& app, const std::string& program, std::string_view tool) {
  app.name(program);
  app.set_version_flag("--version", VersionLine(tool), "print the version line and exit");
  app.option_defaults()->always_capture_default();
  app.get_formatter()->column_width(34);
  CheckStdoutAtExit(tool);
  RecordInputs(true);  // outputs never replace inputs (lib/file_identity.h)
}
inline void SetUpTool(CLI::App& app, std::string_view tool) {
  SetUpTool(app, std::string(tool), tool);
}

// app.parse(args...); a value is the exit code when the tool should stop now: 0 after
// --help or --version, 2 after a bad command line (one line on stderr).
template <typename... Args>
std::optional<int> ParseCommandLine(CLI::App& app, Args&&... args) {
  try {
    app.parse(std::forward<Args>(args)...);
  } catch (const CLI::ParseError& e) {
    if (e.get_exit_code() == 0) return app.exit(e) == 0 ? kExitOk : kExitBadInput;
    std::string message = e.what();
    for (char& c : message)
      if (c == '\n') c = ' ';
    // Point at the help of the subcommand that was being parsed.
    std::string program = app.get_name();
    for (const CLI::App* sub = &app; !sub->get_subcommands().empty();) {
      sub = sub->get_subcommands().front();
      program += " " + sub->get_name();
    }
    const std::string tool = program.substr(0, program.find(' '));
    std::fprintf(stderr, "%s: %s (see '%s --help')\n", tool.c_str(), message.c_str(),
                 program.c_str());
    return kExitBadInput;
  }
  return std::nullopt;
}

// Validators with the reason in the message: "--temperature: must be finite and >= 0".
inline CLI::Validator FiniteAtLeast(double lo) {
  return CLI::Validator(
      [lo](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v)) return "must be a number, got '" + s + "'";
        if (!std::isfinite(v) || v < lo)
          return "must be finite and >= " + CLI::detail::to_string(lo) + ", got '" + s + "'";
        return {};
      },
      "finite, >= " + CLI::detail::to_string(lo));
}
inline CLI::Validator FiniteIn(double lo, double hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v)) return "must be a number, got '" + s + "'";
        if (!std::isfinite(v) || v < lo || v > hi)
          return "must be finite and in [" + CLI::detail::to_string(lo) + ", " +
                 CLI::detail::to_string(hi) + "], got '" + s + "'";
        return {};
      },
      "finite, in [" + CLI::detail::to_string(lo) + ", " + CLI::detail::to_string(hi) + "]");
}
inline CLI::Validator FiniteNumber() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        double v = 0;
        if (!CLI::detail::lexical_cast(s, v)) return "must be a number, got '" + s + "'";
        if (!std::isfinite(v)) return "must be finite, got '" + s + "'";
        return {};
      },
      "finite");
}

// A whole number in [lo, hi] ("-1" for an unsigned count is refused, not wrapped around).
inline CLI::Validator WholeIn(uint64_t lo, uint64_t hi) {
  return CLI::Validator(
      [lo, hi](std::string& s) -> std::string {
        uint64_t v = 0;
        const bool whole = !s.empty() && s.find_first_not_of("0123456789") == std::string::npos &&
                           CLI::detail::lexical_cast(s, v);
        if (!whole || v < lo || v > hi)
          return "must be a whole number in [" + std::to_string(lo) + ", " + std::to_string(hi) +
                 "], got '" + s + "'";
        return {};
      },
      // A type's own maximum is no range a reader needs to see.
      hi == UINT32_MAX || hi == INT32_MAX || hi == UINT64_MAX
          ? "whole, >= " + std::to_string(lo)
          : "whole, in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]");
}

}  // namespace cact::tools
