#include "tools/cact-run/tool_call_cmd.h"
#include "tools/cact-run/tool_name.h"

#include <cstdio>
#include <fstream>
#include <iostream>
#include <memory>
#include <optional>

#include "absl/strings/str_format.h"
#include "engine/generate/prefix_reuse.h"
#include "engine/generate/prompt_cache.h"
#include "engine/text/python_json.h"
#include "lib/counted.h"
#include "lib/file_identity.h"
#include "nlohmann/json.hpp"
#include "tools/common/cli.h"
#include "tools/common/exit_code.h"
#include "tools/common/version.h"

namespace cact {
namespace {

void PrintSingle(const ToolCallCommand& c, const ToolCallResult& r) {
  if (c.json) {
    std::printf("%s\n", ToolCallJson(r).c_str());
  } else {
    std::printf("%s\n", PythonJsonDumps(r.tool_calls).c_str());
  }
  std::fflush(stdout);
  std::string line = TimingLine(r.run);
  line += absl::StrFormat(" | grammar %s, mask %.2f ms over %s | total %.1f ms",
                          c.request.grammar ? "on" : "off", r.grammar.mask_ms,
                          cact::Counted(r.grammar.masked_steps, "step"), r.total_ms);
  std::fprintf(stderr, "%s\n", line.c_str());
  if (c.json) return;
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

// What happened to the tools prefix, for the prompt cache's user.
void ReportPrefix(const PromptCache& cache, const ToolCallResult& r, bool* reported_rebuild) {
  if (!cache.rebuild_reason().empty() && !*reported_rebuild) {
    std::fprintf(stderr, "%s: prompt cache %s: %s; rebuilt\n", kTool, cache.path().c_str(),
                 cache.rebuild_reason().c_str());
    *reported_rebuild = true;
  }
  std::fprintf(stderr, "prompt cache %s: tools prefix of %s %s\n", cache.path().c_str(),
               Counted(r.run.sink, "token").c_str(),
               r.run.prefix_from_file ? "loaded"
               : r.run.prefix_reused  ? "reused"
                                      : "computed and saved");
}

}  // namespace

int RunToolCallCommand(const ToolCallCommand& c) {
  const bool reuse = !c.batch_path.empty() || !c.prompt_cache_path.empty();
  if (!reuse) {
    auto result = RunToolCall(c.request);
    if (!result.ok()) return tools::ReportFailure(kTool, result.status());
    PrintSingle(c, *result);
    // Free decoding (--no-grammar) may produce an invalid answer: that is a finding, exit 1.
    return result->valid ? tools::kExitOk : tools::kExitCheckFailed;
  }

  // Prefix reuse keeps forwards of the model: it is loaded once, here.
  ToolCallRequest req = c.request;
  absl::StatusOr<std::unique_ptr<Model>> model = Model::Open(req.run.model_path);
  if (!model.ok()) return tools::ReportFailure(kTool, model.status());
  absl::StatusOr<Tokenizer> tok =
      Tokenizer::FromBytes((*model)->file().tokenizer_blob(), (*model)->path());
  if (!tok.ok()) return tools::ReportFailure(kTool, tok.status());
  req.run.model = model->get();
  req.run.tokenizer = &*tok;
  const VocabularyTrie trie(*tok);
  req.trie = &trie;
  PrefixReuse prefix_reuse;
  req.run.prefix_reuse = &prefix_reuse;
  std::optional<PromptCache> cache;
  if (!c.prompt_cache_path.empty()) {
    cache.emplace(c.prompt_cache_path, tools::BuildId());
    prefix_reuse.UseFile(&*cache);
  }
  bool reported_rebuild = false;

  if (c.batch_path.empty()) {
    auto result = RunToolCall(req);
    if (!result.ok()) return tools::ReportFailure(kTool, result.status());
    PrintSingle(c, *result);
    ReportPrefix(*cache, *result, &reported_rebuild);
    return result->valid ? tools::kExitOk : tools::kExitCheckFailed;
  }

  // A batch: one JSON object per query line, in order, each flushed as it is done.
  std::ifstream file;
  std::istream* in = &std::cin;
  if (c.batch_path != "-") {
    file.open(c.batch_path, std::ios::binary);
    if (!file)
      return tools::ReportFailure(
          kTool, absl::InvalidArgumentError(c.batch_path + ": cannot read --batch"));
    NoteInput(c.batch_path);
    in = &file;
  }
  const std::string name = c.batch_path == "-" ? "standard input" : c.batch_path;
  std::string line;
  size_t line_no = 0, calls = 0, invalid = 0, failed = 0;
  while (std::getline(*in, line)) {
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.pop_back();
    if (line.find_first_not_of(" \t") == std::string::npos) continue;
    req.query = line;
    absl::StatusOr<ToolCallResult> r = RunToolCall(req);
    nlohmann::ordered_json out = {{"line", line_no}, {"query", line}};
    if (!r.ok()) {
      ++failed;
      out["error"] = std::string(r.status().message());
      std::fprintf(stderr, "%s: %s:%zu: %s\n", kTool, name.c_str(), line_no,
                   std::string(r.status().message()).c_str());
    } else {
      ++calls;
      invalid += !r->valid;
      const nlohmann::ordered_json result = nlohmann::ordered_json::parse(ToolCallJson(*r));
      for (const auto& [key, value] : result.items()) out[key] = value;
      if (cache && calls == 1) ReportPrefix(*cache, *r, &reported_rebuild);
    }
    std::printf("%s\n", out.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace).c_str());
    std::fflush(stdout);
  }
  if (in->bad()) return tools::ReportFailure(kTool, absl::DataLossError(name + ": read failed"));
  std::fprintf(stderr,
               "%s: %s: %s answered, %zu invalid, %zu failed; tools prefix fed %zu, "
               "reused %zu, loaded %zu\n",
               kTool, name.c_str(), Counted(calls, "query", "queries").c_str(), invalid, failed,
               prefix_reuse.misses(), prefix_reuse.hits(), prefix_reuse.file_hits());
  if (failed) return tools::kExitBadInput;
  return invalid ? tools::kExitCheckFailed : tools::kExitOk;
}

}  // namespace cact
