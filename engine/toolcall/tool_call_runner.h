// What `cact-run MODEL --tools FILE --query TEXT` does, as a library: parse the tool
// declarations, keep the tools that fit (retrieval), render the official prompt, and decode
// the answer under the tool-call grammar (or freely with grammar = false), then read the
// calls back out of it and score them with the confidence head.
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/generate/runner.h"
#include "engine/toolcall/tool_call_decoder.h"
#include "nlohmann/json.hpp"

namespace cact {

struct ToolCallRequest {
  // Model, path, threads, sampling, window/sink; max_new_tokens is the answer's budget.
  RunRequest run;
  std::string tools_file;  // named in error messages
  std::string tools_json;  // the file's text
  std::string query;
  std::optional<std::string> system;
  bool grammar = true;
  uint32_t think_max = 64;
  size_t top_tools = 8;  // the official engine keeps 5 (docs/tool-calls.md)
  std::optional<double> min_confidence;
  // Runs of tokens the grammar leaves no choice are fed to the model in one call (the same
  // answer, states and confidence); false feeds a step per token (the tests' oracle).
  bool feed_choiceless_together = true;
  // A caller running many calls passes the trie of run.tokenizer's vocabulary, built once
  // (about 1 ms per build on needle2's 8,192 pieces); null builds one for the call.
  const VocabularyTrie* trie = nullptr;
};

// One declared tool as retrieval saw it.
struct ToolConsidered {
  std::string name;
  double score = 0;
  size_t rank = 0;  // 1 = best; 0 when nothing was ranked
  bool kept = true;
  std::string dropped_by;  // "", "rank" (beyond top_tools) or "context" (did not fit)
};

struct ToolCallResult {
  RunResult run;          // prompt/generated ids, timings of prefill and decode
  std::string text;       // the answer as decoded text
  std::string reasoning;  // the think block's text, stripped
  nlohmann::ordered_json tool_calls = nlohmann::ordered_json::array();
  bool valid = false;  // the answer is a complete, schema-valid call list
  std::string invalid_reason;
  std::optional<double> confidence;  // sigmoid of the confidence head, if the model has one
  bool suppressed = false;           // calls dropped for being below min_confidence
  std::string retrieval = "none";    // "none", "bm25" or "contrastive"
  std::vector<ToolConsidered> tools;
  uint32_t tools_budget_tokens = 0;  // prompt tokens the tool declarations may take
  double retrieval_ms = 0, grammar_setup_ms = 0, total_ms = 0;
  ToolCallDecodeStats grammar;
};

absl::StatusOr<ToolCallResult> RunToolCall(const ToolCallRequest& request);

// The result as one JSON object: text, reasoning, tool_calls, valid, confidence,
// tools_considered, timings.
std::string ToolCallJson(const ToolCallResult& result);

// Reads an answer's bytes (as the model wrote them, leading dummy space included) against
// the catalogue's grammar: fills text, reasoning, tool_calls, valid and invalid_reason.
void ReadAnswer(const ToolCallGrammar& grammar, std::string_view bytes, ToolCallResult* result);

}  // namespace cact
