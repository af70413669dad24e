// `cact-run MODEL --tools FILE --query TEXT`: the tool-call mode's printing over
// engine/toolcall/tool_call_runner.h. Text mode prints the call list (compact JSON) on stdout and the
// timing line on stderr; --json prints the whole result.
#pragma once
#include "engine/toolcall/tool_call_runner.h"

namespace cact {

int RunToolCallCommand(const ToolCallRequest& request, bool json);

}  // namespace cact
