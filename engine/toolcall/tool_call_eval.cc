#include "engine/toolcall/tool_call_eval.h"

#include <cmath>
#include <set>

#include "absl/strings/str_format.h"
#include "engine/toolcall/tool_schema.h"
#include "lib/resources.h"
#include "lib/status.h"

namespace cact {
namespace {

using UnorderedJson = nlohmann::json;

// A call's arguments as an object ({} when absent or not an object).
UnorderedJson Arguments(const UnorderedJson& call) {
  if (call.is_object() && call.contains("arguments") && call["arguments"].is_object())
    return call["arguments"];
  return UnorderedJson::object();
}

std::string Name(const UnorderedJson& call) {
  return call.is_object() && call.contains("name") && call["name"].is_string()
             ? call["name"].get<std::string>()
             : std::string();
}

// Whether `b` is a permutation of `a` under `same`.
template <typename Same>
bool SameMultiset(const UnorderedJson& a, const UnorderedJson& b, Same same) {
  if (a.size() != b.size()) return false;
  std::vector<bool> used(b.size(), false);
  for (const UnorderedJson& x : a) {
    bool found = false;
    for (size_t j = 0; j < b.size() && !found; ++j)
      if (!used[j] && same(x, b[j])) used[j] = found = true;
    if (!found) return false;
  }
  return true;
}

absl::Status LineError(const std::string& file, size_t line, const std::string& field,
                       const std::string& what) {
  return absl::InvalidArgumentError(absl::StrFormat("%s:%d: \"%s\": %s", file, line, field, what));
}

}  // namespace

CallScore ScoreCalls(const UnorderedJson& expected, const UnorderedJson& got) {
  CallScore s;
  // UnorderedJson compares objects as maps (key order never matters) and numbers by value.
  const UnorderedJson exp = expected.is_array() ? expected : UnorderedJson::array();
  const UnorderedJson ans = got.is_array() ? got : UnorderedJson::array();
  s.refusal_expected = exp.empty();
  s.refused = ans.empty();
  s.exact = SameMultiset(exp, ans, [](const UnorderedJson& a, const UnorderedJson& b) {
    return Name(a) == Name(b) && Arguments(a) == Arguments(b);
  });
  s.names_right = SameMultiset(
      exp, ans, [](const UnorderedJson& a, const UnorderedJson& b) { return Name(a) == Name(b); });
  // Arguments: pair each expected call with the first unused answered call of its name.
  std::vector<bool> used(ans.size(), false);
  for (const UnorderedJson& e : exp) {
    const UnorderedJson ea = Arguments(e);
    s.arg_expected += ea.size();
    for (size_t j = 0; j < ans.size(); ++j) {
      if (used[j] || Name(ans[j]) != Name(e)) continue;
      used[j] = true;
      const UnorderedJson aa = Arguments(ans[j]);
      for (auto it = ea.begin(); it != ea.end(); ++it)
        if (aa.contains(it.key()) && aa[it.key()] == it.value()) ++s.arg_hits;
      break;
    }
  }
  for (const UnorderedJson& a : ans) s.arg_answered += Arguments(a).size();
  return s;
}

absl::StatusOr<EvalOutcome> EvaluateExample(const EvalExample& ex, const ToolCallRequest& base,
                                            const std::string& file) {
  const UnorderedJson answers =
      UnorderedJson::parse(ex.answers_json, nullptr, /*allow_exceptions=*/false);
  if (answers.is_discarded() || !answers.is_array())
    return LineError(file, ex.line, "answers", "must be a JSON array of calls");
  absl::StatusOr<ToolCatalog> catalog = ParseToolCatalog(ex.tools_json, file);
  if (!catalog.ok())
    return LineError(file, ex.line, "tools", std::string(catalog.status().message()));
  std::set<std::string> declared;
  for (const ToolSpec& t : catalog->tools) declared.insert(t.name);
  for (size_t i = 0; i < answers.size(); ++i) {
    const std::string name = Name(answers[i]);
    if (name.empty())
      return LineError(file, ex.line, "answers",
                       absl::StrFormat("call %d has no \"name\" string", i + 1));
    if (!declared.count(name))
      return LineError(
          file, ex.line, "answers",
          absl::StrFormat("call %d names '%s', which the tools do not declare", i + 1, name));
  }
  ToolCallRequest req = base;
  req.tools_file = absl::StrFormat("%s:%d", file, ex.line);
  req.tools_json = ex.tools_json;
  req.query = ex.query;
  if (ex.system) req.system = ex.system;
  const Stopwatch clock;
  absl::StatusOr<ToolCallResult> r = RunToolCall(req);
  if (!r.ok())
    return absl::Status(r.status().code(),
                        absl::StrFormat("%s:%d: %s", file, ex.line, r.status().message()));
  EvalOutcome o;
  o.ms = clock.Millis();
  o.line = ex.line;
  o.query = ex.query;
  o.expected = answers;
  o.got = UnorderedJson::parse(r->tool_calls.dump());
  o.valid = r->valid;
  o.invalid_reason = r->invalid_reason;
  o.score = ScoreCalls(o.expected, o.got);
  o.prefix_reused = r->run.prefix_reused;
  o.prefix_from_file = r->run.prefix_from_file;
  return o;
}

std::pair<double, double> Rate::Interval() const {
  if (total == 0) return {0.0, 1.0};
  const double z = 1.96, n = double(total), p = value();
  const double denom = 1 + z * z / n;
  const double center = (p + z * z / (2 * n)) / denom;
  const double half = z * std::sqrt(p * (1 - p) / n + z * z / (4 * n * n)) / denom;
  return {std::max(0.0, center - half), std::min(1.0, center + half)};
}

EvalTotals Summarize(const std::vector<EvalOutcome>& outcomes) {
  EvalTotals t;
  t.examples = outcomes.size();
  for (const EvalOutcome& o : outcomes) {
    const CallScore& s = o.score;
    t.valid.total++;
    t.valid.hits += o.valid;
    t.exact.total++;
    t.exact.hits += s.exact;
    t.names_right.total++;
    t.names_right.hits += s.names_right;
    if (s.refusal_expected) {
      t.refusals_right.total++;
      t.refusals_right.hits += s.refused;
    } else {
      t.false_refusals.total++;
      t.false_refusals.hits += s.refused;
    }
    t.arg_precision.hits += s.arg_hits;
    t.arg_precision.total += s.arg_answered;
    t.arg_recall.hits += s.arg_hits;
    t.arg_recall.total += s.arg_expected;
    t.ms_total += o.ms;
  }
  return t;
}

}  // namespace cact
