// `cact-run eval`: tool-call accuracy on the official JSONL (engine/toolcall/tool_call_eval.h).
#pragma once

namespace cact {

// argv[0] is the subcommand's name.
int EvalMain(int argc, char** argv);

}  // namespace cact
