// The name cact-run's messages and --version start with, shared by its subcommands.
#pragma once

namespace cact {

inline constexpr const char* kTool = "cact-run";

}  // namespace cact
