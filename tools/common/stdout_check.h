// Standard output is an output like any other: when a write to it failed (a full device, a
// closed pipe), the tool says so and exits 2 instead of reporting success. SIGPIPE is
// ignored so a closed pipe is such an error rather than a silent kill.
#pragma once
#include <string_view>

namespace cact::tools {

// Registers, once per process, an exit handler that flushes and closes standard output and
// on failure prints "TOOL: standard output: write failed: REASON" and exits 2.
void CheckStdoutAtExit(std::string_view tool);

}  // namespace cact::tools
