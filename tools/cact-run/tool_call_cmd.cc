#include "tools/cact-run/tool_call_cmd.h"

#include <cstdio>

#include "absl/strings/str_format.h"
#include "lib/counted.h"
#include "engine/text/python_json.h"
#include "tools/common/cli.h"
#include "tools/common/exit_code.h"

namespace cact {

int RunToolCallCommand(const ToolCallRequest& request, bool json) {
  auto result = RunToolCall(request);
  if (!result.ok()) return tools::ReportFailure("cact-run", result.status());
  const ToolCallResult& r = *result;
  if (json) {
    std::printf("%s\n", ToolCallJson(r).c_str());
  } else {
    std::printf("%s\n", PythonJsonDumps(r.tool_calls).c_str());
  }
  std::fflush(stdout);
  std::string line = TimingLine(r.run);
  line += absl::StrFormat(" | grammar %s, mask %.2f ms over %s | total %.1f ms",
                          request.grammar ? "on" : "off", r.grammar.mask_ms,
                          cact::Counted(r.grammar.masked_steps, "step"),
                          r.total_ms);
  std::fprintf(stderr, "%s\n", line.c_str());
  if (!json) {
    if (r.retrieval != "none") {
      size_t kept = 0;
      for (const ToolConsidered& t : r.tools) kept += t.kept;
      std::fprintf(stderr, "tools: %zu of %zu kept (%s ranking)\n", kept, r.tools.size(),
                   r.retrieval.c_str());
    }
    if (r.confidence)
      std::fprintf(stderr, "confidence %.4f%s\n", *r.confidence,
                   r.suppressed ? " (below --min-confidence: calls suppressed)" : "");
    if (!r.valid) std::fprintf(stderr, "invalid answer: %s\n", r.invalid_reason.c_str());
  }
  // Free decoding (--no-grammar) may produce an invalid answer: that is a finding, exit 1.
  return r.valid ? tools::kExitOk : tools::kExitCheckFailed;
}

}  // namespace cact
