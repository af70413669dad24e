// Tool-call accuracy: one example (a query, its tool declarations and the expected calls)
// decoded exactly as `cact-run --tools` decodes it, and scored against the expected calls;
// the totals over a set, with Wilson intervals for the rates.
//
// Scoring compares calls as JSON values (Python's ==: key order never matters, 1 == 1.0):
//  - exact: the calls, as a multiset of {name, arguments}, equal the expected ones;
//  - names right: the multiset of tool names is equal;
//  - refusals: an expected [] answered with [] (and, counted apart, a false refusal: [] where
//    calls were expected);
//  - arguments: over calls paired by name (in order), every (key, value) of the expected
//    arguments equal in the answer is a hit: precision = hits / answered pairs, recall =
//    hits / expected pairs.
#pragma once
#include <cstddef>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/toolcall/tool_call_runner.h"
#include "nlohmann/json.hpp"

namespace cact {

struct CallScore {
  bool exact = false;
  bool names_right = false;
  bool refusal_expected = false;  // the expected answer is []
  bool refused = false;           // the answer is []
  size_t arg_hits = 0, arg_expected = 0, arg_answered = 0;
};

// Both are arrays of {"name", "arguments"} objects (a call without "arguments" has none).
CallScore ScoreCalls(const nlohmann::json& expected, const nlohmann::json& got);

struct EvalExample {
  std::string query;
  std::string tools_json;    // the declarations, as a JSON array
  std::string answers_json;  // the expected calls, as a JSON array
  std::optional<std::string> system;
  size_t line = 0;  // 1-based line of the JSONL file, for messages
};

struct EvalOutcome {
  size_t line = 0;
  std::string query;
  nlohmann::json expected, got;
  bool valid = false;  // the answer was a complete, schema-valid call list
  std::string invalid_reason;
  CallScore score;
  double ms = 0;               // end to end, this example
  bool prefix_reused = false;  // the tools prefix's state was restored, not fed
  bool prefix_from_file = false;  // ... from the prompt cache file
};

// Checks the example (the expected calls must name declared tools), then decodes it with
// `base` (model, path, threads, budget, grammar...; its tools and query are replaced).
// Errors name `file:line` and the field.
absl::StatusOr<EvalOutcome> EvaluateExample(const EvalExample& example, const ToolCallRequest& base,
                                            const std::string& file);

struct Rate {
  size_t hits = 0, total = 0;
  double value() const { return total ? double(hits) / double(total) : 0.0; }
  // The Wilson score interval at 95 % (z = 1.96); [0, 1] when total is 0.
  std::pair<double, double> Interval() const;
};

struct EvalTotals {
  size_t examples = 0;
  Rate valid, exact, names_right, refusals_right, false_refusals, arg_precision, arg_recall;
  double ms_total = 0;
};

EvalTotals Summarize(const std::vector<EvalOutcome>& outcomes);

}  // namespace cact
