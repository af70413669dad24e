// `cact-run MODEL --tools FILE --query TEXT` and `--batch QUERIES`: the tool-call mode's
// printing over engine/toolcall/tool_call_runner.h. Text mode prints the call list (compact
// JSON) on stdout and the timing line on stderr; --json prints the whole result; a batch
// prints one JSON result per query line.
#pragma once
#include <string>

#include "engine/toolcall/tool_call_runner.h"

namespace cact {

struct ToolCallCommand {
  ToolCallRequest request;
  bool json = false;
  // One query per line of this file ("-": standard input) instead of request.query.
  std::string batch_path;
  // The tools prefix's state kept in this file across runs (engine/generate/prompt_cache.h).
  std::string prompt_cache_path;
};

int RunToolCallCommand(const ToolCallCommand& command);

}  // namespace cact
