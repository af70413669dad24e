// `cact-run eval`: tool-call accuracy of a model (and, with --compare, of a second one on the
// same examples) over the official fine-tuning JSONL. Flags and printing over
// engine/toolcall/tool_call_eval.h; the JSONL is read by train/finetune_data.h, exactly as
// `cact-torch finetune` reads it.
#include "tools/cact-run/eval_cmd.h"
#include "tools/cact-run/tool_name.h"

#include <cstdio>
#include <fstream>
#include <memory>
#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_format.h"
#include "engine/generate/prefix_reuse.h"
#include "engine/generate/prompt_cache.h"
#include "engine/model.h"
#include "engine/text/tokenizer.h"
#include "engine/toolcall/tool_call_eval.h"
#include "lib/counted.h"
#include "lib/file_identity.h"
#include "lib/progress.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"
#include "tools/common/template_option.h"
#include "tools/common/cli.h"
#include "tools/common/exit_code.h"
#include "tools/common/version.h"
#include "train/finetune_data.h"

namespace cact {
namespace {

using Json = nlohmann::ordered_json;

// A model and its tokenizer, loaded once for every example.
struct Loaded {
  std::unique_ptr<Model> model;
  std::optional<Tokenizer> tokenizer;
};

absl::StatusOr<Loaded> Load(const std::string& path) {
  Loaded l;
  CACT_ASSIGN_OR_RETURN(l.model, Model::Open(path));
  CACT_ASSIGN_OR_RETURN(l.tokenizer,
                        Tokenizer::FromBytes(l.model->file().tokenizer_blob(), l.model->path()));
  return l;
}

std::string Percent(const Rate& r) {
  if (r.total == 0) return "-";
  const auto [lo, hi] = r.Interval();
  return absl::StrFormat("%.1f %% (%d/%d) [%.1f, %.1f]", 100 * r.value(), r.hits, r.total, 100 * lo,
                         100 * hi);
}

Json RateJson(const Rate& r) {
  const auto [lo, hi] = r.Interval();
  return Json{
      {"hits", r.hits}, {"total", r.total}, {"rate", r.value()}, {"ci95", Json::array({lo, hi})}};
}

Json TotalsJson(const EvalTotals& t) {
  return Json{{"examples", t.examples},
              {"valid", RateJson(t.valid)},
              {"exact", RateJson(t.exact)},
              {"names_right", RateJson(t.names_right)},
              {"refusals_right", RateJson(t.refusals_right)},
              {"false_refusals", RateJson(t.false_refusals)},
              {"argument_precision", RateJson(t.arg_precision)},
              {"argument_recall", RateJson(t.arg_recall)},
              {"ms_per_example", t.examples ? t.ms_total / double(t.examples) : 0.0}};
}

Json OutcomeJson(const EvalOutcome& o) {
  Json j{{"line", o.line},
         {"query", o.query},
         {"expected", o.expected},
         {"got", o.got},
         {"valid", o.valid},
         {"exact", o.score.exact},
         {"names_right", o.score.names_right},
         {"refused", o.score.refused},
         {"argument_hits", o.score.arg_hits},
         {"arguments_expected", o.score.arg_expected},
         {"arguments_answered", o.score.arg_answered},
         {"ms", o.ms},
         {"prefix_reused", o.prefix_reused},
         {"prefix_from_file", o.prefix_from_file}};
  if (!o.valid) j["invalid_reason"] = o.invalid_reason;
  return j;
}

void PrintTable(const std::vector<std::string>& names, const std::vector<EvalTotals>& totals) {
  auto row = [&](const char* metric, auto get) {
    std::printf("| %s |", metric);
    for (const EvalTotals& t : totals) std::printf(" %s |", get(t).c_str());
    std::printf("\n");
  };
  std::printf("| metric |");
  for (const std::string& n : names) std::printf(" %s |", n.c_str());
  std::printf("\n|---|");
  for (size_t i = 0; i < names.size(); ++i) std::printf("---:|");
  std::printf("\n");
  row("exact calls", [](const EvalTotals& t) { return Percent(t.exact); });
  row("right tool names", [](const EvalTotals& t) { return Percent(t.names_right); });
  row("valid answers", [](const EvalTotals& t) { return Percent(t.valid); });
  row("refusals right ([] expected)",
      [](const EvalTotals& t) { return Percent(t.refusals_right); });
  row("false refusals ([] given)", [](const EvalTotals& t) { return Percent(t.false_refusals); });
  row("argument precision", [](const EvalTotals& t) { return Percent(t.arg_precision); });
  row("argument recall", [](const EvalTotals& t) { return Percent(t.arg_recall); });
  row("ms per example", [](const EvalTotals& t) {
    return absl::StrFormat("%.1f", t.examples ? t.ms_total / double(t.examples) : 0.0);
  });
}

void PrintFailure(const EvalOutcome& o) {
  std::printf("line %zu: %s\n  expected %s\n  got      %s%s\n", o.line, o.query.c_str(),
              o.expected.dump().c_str(), o.got.dump().c_str(),
              o.valid ? "" : ("  (invalid: " + o.invalid_reason + ")").c_str());
}

}  // namespace

int EvalMain(int argc, char** argv) {
  CLI::App app{
      "cact-run eval: tool-call accuracy on the official fine-tuning JSONL (query, tools, "
      "answers; optional system), decoded exactly as `cact-run --tools` decodes"};
  tools::SetUpTool(app, "cact-run eval", kTool);
  std::string model_path, data, tools_path, compare_path, prompt_cache_path, path = "auto";
  ToolCallRequest base;
  bool no_grammar = false, json = false, quiet = false, no_reuse = false;
  size_t show_failures = 0, limit = 0;
  base.run.max_new_tokens = 128;
  app.add_option("model", model_path, ".cact or .cact.zst model")->required();
  app.add_option("-f,--file", data, "examples, one JSON object a line (.jsonl)")->required();
  app.add_option("--tools", tools_path,
                 "tool declarations (JSON array) for rows whose tools are absent or empty");
  app.add_option("--compare", compare_path,
                 "a second model on the same examples: side by side, the examples it fixes and "
                 "breaks");
  app.add_option("--path", path, "forward path: fast, fast-int8, ref or auto (fast)")
      ->check(CLI::IsMember({"fast", "fast-int8", "ref", "reference", "auto"}));
  app.add_option("-t,--threads", base.run.threads,
                 "threads (default: the CPUs this process may use, at most the model's KV heads)")
      ->check(tools::WholeIn(1, 256))
      ->default_str("auto");
  app.add_option("-n,--max-new-tokens", base.run.max_new_tokens, "the answer's token budget")
      ->check(tools::WholeIn(1, UINT32_MAX));
  app.add_option("--think-max", base.think_max,
                 "tokens of free think text before </think> is forced")
      ->check(tools::WholeIn(0, UINT32_MAX));
  app.add_option("--top-tools", base.top_tools, "keep at most K tools per example")
      ->check(tools::WholeIn(1, 1 << 20));
  app.add_flag("--no-grammar", no_grammar, "generate freely instead of under the grammar");
  std::string template_name;
  AddTemplateOption(app, &template_name);
  app.add_flag("--no-prefix-reuse", no_reuse,
               "feed every prompt whole (by default the tool declarations' state is computed "
               "once per tool set and restored: the same results, faster)");
  app.add_option("--prompt-cache", prompt_cache_path,
                 "keep the tool declarations' states in FILE and load them from there in later "
                 "runs of the same model (checked as cact-run --prompt-cache checks it)")
      ->excludes("--compare")
      ->excludes("--no-prefix-reuse");
  app.add_option("--limit", limit, "evaluate only the first N examples (0 = all)")
      ->check(tools::WholeIn(0, UINT32_MAX));
  app.add_option("--show-failures", show_failures,
                 "print up to N examples that were not exact (query, expected, got)")
      ->check(tools::WholeIn(0, UINT32_MAX));
  app.add_flag("--json", json, "print one JSON object: the totals and every example");
  app.add_flag("-q,--quiet", quiet, "no progress lines on stderr");
  app.footer(
      "Examples:\n  cact-run eval model.cact -f calls.jsonl --show-failures 5\n"
      "  cact-run eval base.cact -f calls.jsonl --compare tuned.cact --json\n"
      "  cact-run eval model.cact -f calls.jsonl --prompt-cache calls.pc");
  if (auto code = tools::ParseCommandLine(app, argc, argv)) return *code;
  if (absl::Status st =
          CheckOutputIsNotInput(prompt_cache_path, {model_path, data, tools_path}, "--prompt-cache");
      !st.ok())
    return tools::ReportFailure(kTool, st);
  base.run.path = path;
  base.run.chat_template = *ParseChatTemplate(template_name);
  base.grammar = !no_grammar;

  absl::StatusOr<train::FinetuneSet> set = train::ReadFinetuneJsonl(data);
  if (!set.ok()) return tools::ReportFailure(kTool, set.status());
  std::string fallback_tools;
  if (!tools_path.empty()) {
    std::ifstream f(tools_path, std::ios::binary);
    std::ostringstream ss;
    if (!f || !(ss << f.rdbuf()))
      return tools::ReportFailure(
          kTool, absl::InvalidArgumentError(tools_path + ": cannot read the tools file"));
    fallback_tools = ss.str();
  }
  std::vector<EvalExample> examples;
  for (const train::FinetuneExample& e : set->examples) {
    EvalExample x{e.query, e.tools_json, e.answers_json, std::nullopt, e.line};
    if (!e.system.empty()) x.system = e.system;
    if (x.tools_json == "[]") {
      if (fallback_tools.empty())
        return tools::ReportFailure(
            kTool,
            absl::InvalidArgumentError(absl::StrFormat(
                "%s:%d: \"tools\": the row declares none and no --tools was given", data, e.line)));
      x.tools_json = fallback_tools;
    }
    examples.push_back(std::move(x));
    if (limit && examples.size() == limit) break;
  }
  if (examples.empty())
    return tools::ReportFailure(kTool,
                                absl::InvalidArgumentError(data + ": no examples to evaluate"));

  std::vector<std::string> paths = {model_path};
  if (!compare_path.empty()) paths.push_back(compare_path);
  std::vector<std::vector<EvalOutcome>> outcomes(paths.size());
  for (size_t m = 0; m < paths.size(); ++m) {
    absl::StatusOr<Loaded> loaded = Load(paths[m]);
    if (!loaded.ok()) return tools::ReportFailure(kTool, loaded.status());
    ToolCallRequest req = base;
    req.run.model_path = paths[m];
    req.run.model = loaded->model.get();
    req.run.tokenizer = &*loaded->tokenizer;
    const VocabularyTrie trie(*loaded->tokenizer);
    req.trie = &trie;
    PrefixReuse reuse;
    if (!no_reuse) req.run.prefix_reuse = &reuse;
    // One model's states (--compare is refused with it): the first model's.
    std::optional<PromptCache> cache;
    if (!prompt_cache_path.empty() && m == 0) {
      cache.emplace(prompt_cache_path, tools::BuildId());
      reuse.UseFile(&*cache);
    }
    size_t from_file = 0;
    Progress progress(paths[m], examples.size(), !quiet);
    size_t exact = 0;
    for (size_t i = 0; i < examples.size(); ++i) {
      absl::StatusOr<EvalOutcome> o = EvaluateExample(examples[i], req, data);
      if (!o.ok()) return tools::ReportFailure(kTool, o.status());
      exact += o->score.exact;
      from_file += o->prefix_from_file;
      outcomes[m].push_back(std::move(*o));
      progress.Step(i + 1, absl::StrFormat("exact %d of %d", exact, i + 1));
    }
    progress.Done();
    if (cache) {
      if (!cache->rebuild_reason().empty())
        std::fprintf(stderr, "%s: prompt cache %s: %s; rebuilt\n", kTool, cache->path().c_str(),
                     cache->rebuild_reason().c_str());
      std::fprintf(stderr, "prompt cache %s: tools prefix loaded for %s of %s\n",
                   cache->path().c_str(), Counted(from_file, "example").c_str(),
                   Counted(examples.size(), "example").c_str());
    }
  }

  std::vector<EvalTotals> totals;
  for (const auto& o : outcomes) totals.push_back(Summarize(o));
  // The examples the second model fixes (exact there, not in the first) and breaks.
  std::vector<size_t> fixes, breaks;
  if (outcomes.size() == 2)
    for (size_t i = 0; i < examples.size(); ++i) {
      const bool a = outcomes[0][i].score.exact, b = outcomes[1][i].score.exact;
      if (b && !a) fixes.push_back(i);
      if (a && !b) breaks.push_back(i);
    }

  if (json) {
    Json j{{"file", data},
           {"examples", examples.size()},
           {"skipped_lines", set->skipped},
           {"grammar", base.grammar}};
    Json models = Json::array();
    for (size_t m = 0; m < paths.size(); ++m) {
      Json per = Json::array();
      for (const EvalOutcome& o : outcomes[m]) per.push_back(OutcomeJson(o));
      models.push_back(
          {{"model", paths[m]}, {"totals", TotalsJson(totals[m])}, {"per_example", per}});
    }
    j["models"] = std::move(models);
    if (outcomes.size() == 2) {
      Json f = Json::array(), b = Json::array();
      for (size_t i : fixes) f.push_back(examples[i].line);
      for (size_t i : breaks) b.push_back(examples[i].line);
      j["fixed_lines"] = f;
      j["broken_lines"] = b;
    }
    std::printf("%s\n", j.dump().c_str());
    return tools::kExitOk;
  }

  std::printf(
      "cact-run eval: %s, %s (grammar %s%s)\n\n", data.c_str(),
      Counted(examples.size(), "example").c_str(), base.grammar ? "on" : "off",
      set->skipped ? absl::StrFormat(", %s skipped", Counted(set->skipped, "line")).c_str() : "");
  PrintTable(paths, totals);
  std::printf("\nrates with their 95 %% Wilson intervals\n");
  if (outcomes.size() == 2) {
    std::printf("\n%s: fixes %s, breaks %s; exact %+.1f points\n", compare_path.c_str(),
                Counted(fixes.size(), "example").c_str(), Counted(breaks.size(), "example").c_str(),
                100 * (totals[1].exact.value() - totals[0].exact.value()));
    for (size_t i : fixes)
      std::printf("  fixed  line %zu: %s\n", examples[i].line, examples[i].query.c_str());
    for (size_t i : breaks)
      std::printf("  broken line %zu: %s\n", examples[i].line, examples[i].query.c_str());
  }
  if (show_failures) {
    for (size_t m = 0; m < paths.size(); ++m) {
      size_t shown = 0;
      std::printf("\nnot exact (%s):\n", paths[m].c_str());
      for (const EvalOutcome& o : outcomes[m])
        if (!o.score.exact && shown++ < show_failures) PrintFailure(o);
    }
  }
  return tools::kExitOk;
}

}  // namespace cact
