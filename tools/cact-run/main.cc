// cact-run: run a .cact model on the CPU. Flag parsing and printing only; everything else
// is engine/generate/runner.h.
//
//   cact-run MODEL --tokens 2,17,40 --logits OUT.npy [--last] [--window W --sink P]
//   cact-run MODEL -p TEXT [-n N] [--temperature T --top-k K --top-p P --seed S]
//   cact-run MODEL --tools tools.json --query TEXT [--system TEXT] [-n N] [--think-max N]
//            [--top-tools K] [--min-confidence X] [--no-grammar] [--json] [--prompt-cache F]
//            [--template v2.0.12|v2.0.9]
//   cact-run MODEL --tools tools.json --batch QUERIES [--prompt-cache F] [--template NAME]
//   cact-run MODEL --validate [--tokens ...|-p ...|--tools F --query T [--template NAME]]
//            [-n STEPS]
//   cact-run bench MODEL [-p 256] [-n 128] [-d 0,256,1024,2048] [-r 5] [-t 1,2] [--json]
//   cact-run perplexity MODEL -f TEXT [--ctx N] [--json]
//   cact-run compare BASE OTHER -f TEXT [--ctx N] [--json] [--svg HIST.svg]
//   cact-run eval MODEL -f DATA.jsonl [--compare OTHER] [--show-failures N] [--json]
//            [--template NAME]
//   cact-run --version
// Common: --ref / --path fast|ref|auto, -t THREADS, --dump-hidden DIR, --probes, --json.
// Token lists: tools/common/token_list.h. Exit codes (tools/common/exit_code.h): 0 ok,
// 1 validation failed or internal error, 2 bad input.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "engine/generate/runner.h"
#include "lib/file_identity.h"
#include "tools/cact-run/bench/bench.h"
#include "tools/cact-run/eval_cmd.h"
#include "tools/cact-run/score_cmd.h"
#include "tools/cact-run/tool_call_cmd.h"
#include "tools/cact-run/tool_name.h"
#include "tools/common/cli.h"
#include "tools/common/exit_code.h"
#include "tools/common/template_option.h"
#include "tools/common/token_list.h"

namespace {

using cact::kTool;

bool ReadText(const std::string& path, std::string* out) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return false;
  std::ostringstream ss;
  ss << f.rdbuf();
  *out = ss.str();
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  // Subcommands, each with its own flags: bench (tools/cact-run/bench/bench.h), perplexity
  // and compare (score_cmd.h).
  const std::string sub = argc > 1 ? argv[1] : "";
  if (sub == "bench") return cact::BenchMain(argc - 1, argv + 1);
  if (sub == "perplexity") return cact::PerplexityMain(argc - 1, argv + 1);
  if (sub == "compare") return cact::CompareMain(argc - 1, argv + 1);
  if (sub == "eval") return cact::EvalMain(argc - 1, argv + 1);
  CLI::App app{
      "cact-run: run a .cact model (FP32 reference or fast int8 path): logits, "
      "generation, the Needle chat template, path validation, timings"};
  cact::tools::SetUpTool(app, kTool);
  cact::RunRequest req;
  std::string tokens, tools_file, prompt, query, system, path = "auto";
  bool ref = false, json = false;
  uint32_t window = 0, sink = 0, n = 0;

  app.add_option("model", req.model_path, ".cact or .cact.zst model")->required();
  app.add_flag("--ref", ref, "use the FP32 reference path (same as --path ref)");
  app.add_option("--path", path,
                 "forward path: fast, fast-int8 (plain int8 numerics), ref or auto (fast)")
      ->check(CLI::IsMember({"fast", "fast-int8", "ref", "reference", "auto"}));
  app.add_option("--tokens", tokens, "comma-separated token ids to feed, e.g. 2,17,40");
  app.add_option("-p,--prompt", prompt, "text prompt (BOS + SentencePiece encoding)");
  app.add_option("--tools", tools_file, "JSON file with the tool declarations (chat template)");
  app.add_option("--query", query, "user query for the chat template");
  app.add_option("--system", system, "optional system turn for the chat template");
  std::string template_name;
  cact::AddTemplateOption(app, &template_name);
  auto* n_opt =
      app.add_option("-n,--max-new-tokens", n,
                     "tokens to generate (validate: decode steps, default 64; tool calls: the "
                     "answer's budget, default 128); the prompt and these must fit the model's "
                     "max_seq_len")
          ->check(cact::tools::WholeIn(0, UINT32_MAX));
  app.add_option(
         "-t,--threads", req.threads,
         "threads (default: the CPUs this process may use, at most the model's KV heads; the "
         "reference path 1)")
      ->check(cact::tools::WholeIn(1, 256))
      ->default_str("auto");
  auto* window_opt =
      app.add_option("--window", window,
                     "attention window W, 0 (causal) to max_seq_len")
          ->check(cact::tools::WholeIn(0, UINT32_MAX))
          ->default_str("header kv_window");
  auto* sink_opt =
      app.add_option("--sink", sink,
                     "pinned first positions, 0 to max_seq_len (the tool declarations in chat "
                     "mode, else 0)")
          ->check(cact::tools::WholeIn(0, UINT32_MAX))
          ->default_str("auto");
  app.add_option("--temperature", req.sampling.temperature, "sampling temperature (0 = greedy)")
      ->check(cact::tools::FiniteAtLeast(0));
  app.add_option("--top-k", req.sampling.top_k, "keep the k most likely tokens (0 = all)")
      ->check(cact::tools::WholeIn(0, INT32_MAX));
  app.add_option("--top-p", req.sampling.top_p, "nucleus mass (1 = all)")
      ->check(cact::tools::FiniteIn(0.0, 1.0));
  app.add_option("--seed", req.sampling.seed, "sampling seed")
      ->check(cact::tools::WholeIn(0, UINT64_MAX));
  app.add_flag("--ignore-eos", req.ignore_eos, "keep generating past the end-of-sequence token");
  app.add_option("--logits", req.logits_path,
                 "write the prompt's logits [T, vocab] float32 .npy ('-': standard output)");
  app.add_flag("--last", req.last_only, "with --logits: only the last position [1, vocab]");
  app.add_option("--dump-hidden", req.dump_hidden_dir,
                 "write DIR/hidden.npy: lane mean after each layer [L, T, d] (DIR must exist)");
  app.add_flag("--probes", req.probes, "compute the probe heads (confidence, retrieval embedding)");
  app.add_flag("--validate", req.validate,
               "compare the reference with --path (default fast): "
               "per-layer hidden rel-L2, logits rel-L2, top-1, KL; exit 1 past thresholds");
  app.add_option("--max-rel-l2", req.thresholds.max_logits_rel_l2, "validate: logits rel-L2 bound")
      ->check(cact::tools::FiniteAtLeast(0));
  app.add_option("--min-top1", req.thresholds.min_top1,
                 "validate: top-1 agreement bound, a fraction (0.99 = 99 %)")
      ->check(cact::tools::FiniteIn(0, 1));
  app.add_option("--max-kl-mean", req.thresholds.max_kl_mean, "validate: mean KL bound (nats)")
      ->check(cact::tools::FiniteAtLeast(0));
  app.add_option("--max-kl", req.thresholds.max_kl_max, "validate: max KL bound (nats)")
      ->check(cact::tools::FiniteAtLeast(0));
  app.add_flag("--json", json, "print one JSON object (text, ids, timings, validation) on stdout");
  // Tool calls (--tools with --query): the answer is decoded under the grammar of the
  // declared schemas (engine/toolcall/tool_call_runner.h).
  cact::ToolCallRequest call;
  bool no_grammar = false;
  app.add_flag("--no-grammar", no_grammar,
               "tool calls: generate freely instead of under the schemas' grammar");
  app.add_option("--think-max", call.think_max,
                 "tool calls: tokens of free think text before </think> is forced")
      ->check(cact::tools::WholeIn(0, UINT32_MAX));
  app.add_option("--top-tools", call.top_tools,
                 "tool calls: keep at most K tools, ranked against the query (contrastive "
                 "head, else BM25), when the catalogue is larger or does not fit")
      ->check(cact::tools::WholeIn(1, 1 << 20));
  app.add_option("--min-confidence", call.min_confidence,
                 "tool calls: return [] when the confidence head scores the call below X")
      ->check(cact::tools::FiniteIn(0.0, 1.0));
  cact::ToolCallCommand command;
  app.add_option("--batch", command.batch_path,
                 "tool calls: one query per line of FILE ('-': standard input), one JSON "
                 "result per line on stdout; the tools prefix is computed once");
  app.add_option("--prompt-cache", command.prompt_cache_path,
                 "tool calls: keep the tools prefix's state in FILE and load it from there in "
                 "later runs (checked against the model, tools, path and build; a stale or "
                 "damaged file is rebuilt)");

  app.footer(
      "Subcommands (each with its own --help):\n"
      "  cact-run bench MODEL        prefill and decode speed (llama-bench style)\n"
      "  cact-run perplexity MODEL   perplexity of a text file\n"
      "  cact-run compare BASE OTHER KL divergence and top-1 agreement of two models\n"
      "  cact-run eval MODEL -f F    tool-call accuracy on the official JSONL\n"
      "Examples:\n"
      "  cact-run model.cact -p \"The weather today\" -n 32\n"
      "  cact-run model.cact --tools tools.json --query \"What is the weather in Oslo?\"\n"
      "  cact-run model.cact --tools tools.json --batch queries.txt --prompt-cache tools.pc\n"
      "  cact-run model.cact --validate -p \"Hello\" -n 16");

  if (auto code = cact::tools::ParseCommandLine(app, argc, argv)) return *code;
  // Outputs never replace inputs: refused before any work.
  for (const auto& [out, role] : {std::pair{req.logits_path, "--logits"},
                                  std::pair{req.dump_hidden_dir, "--dump-hidden"},
                                  std::pair{command.prompt_cache_path, "--prompt-cache"}}) {
    if (absl::Status st = cact::CheckOutputIsNotInput(
            out, {req.model_path, tools_file, command.batch_path}, role);
        !st.ok())
      return cact::tools::ReportFailure(kTool, st);
  }

  req.path = ref ? "ref" : path;
  if (!tokens.empty()) {
    auto ids = cact::tools::ParseTokenIds(tokens);
    if (!ids.ok()) return cact::tools::ReportFailure(kTool, ids.status());
    req.tokens = std::move(ids).value();
  }
  if (!prompt.empty()) req.prompt = prompt;
  if (!tools_file.empty()) {
    std::string text;
    std::error_code ec;
    if (std::filesystem::is_directory(tools_file, ec))
      return cact::tools::ReportFailure(
          kTool, absl::InvalidArgumentError(
                     tools_file + ": --tools is a directory; give the JSON file of the tool "
                                  "declarations"));
    if (!ReadText(tools_file, &text))
      return cact::tools::ReportFailure(
          kTool, absl::InvalidArgumentError(tools_file + ": cannot read the tools file"));
    req.tools_json = std::move(text);
  }
  if (!query.empty()) req.query = query;
  if (!system.empty()) req.system = system;
  if (*window_opt) req.window = window;
  if (*sink_opt) req.sink = sink;
  req.max_new_tokens = n;
  if (req.validate && *n_opt) {
    req.validate_steps = n;
    req.validate_steps_given = true;
  }

  const bool batch = !command.batch_path.empty();
  if (batch || !command.prompt_cache_path.empty()) {
    std::string why;
    if (!req.tools_json) why = "needs --tools";
    else if (batch && req.query) why = "--batch takes the queries from its file, not --query";
    else if (!batch && !req.query) why = "needs --query or --batch";
    else if (req.validate || req.tokens || req.prompt) why = "is for tool calls (--tools with --query or --batch)";
    if (!why.empty())
      return cact::tools::ReportFailure(
          kTool, absl::InvalidArgumentError(
                     std::string(batch ? "--batch" : "--prompt-cache") + " " + why));
  }
  req.chat_template = *cact::ParseChatTemplate(template_name);
  if (req.tools_json && (req.query || batch) && !req.validate) {
    call.tools_file = tools_file;
    call.tools_json = *req.tools_json;
    if (req.query) call.query = *req.query;
    call.system = req.system;
    call.run = req;
    call.grammar = !no_grammar;
    if (!*n_opt) call.run.max_new_tokens = 128;
    command.request = std::move(call);
    command.json = json;
    return cact::RunToolCallCommand(command);
  }

  const bool stream = !json && !req.validate;
  auto result = cact::RunModel(req, [&](std::string_view text) {
    if (!stream) return;
    std::fwrite(text.data(), 1, text.size(), stdout);
    std::fflush(stdout);
  });
  if (!result.ok()) return cact::tools::ReportFailure(kTool, result.status());
  if (stream && !result->generated_ids.empty()) std::fputc('\n', stdout);
  if (json) {
    std::printf("%s\n", cact::ResultJson(*result).c_str());
  } else if (result->validation) {
    std::fputs(result->validation->ToText().c_str(), stdout);
  }
  std::fflush(stdout);  // keep the report before the timing line on a shared terminal
  std::fprintf(stderr, "%s\n", cact::TimingLine(*result).c_str());
  if (result->probes && !json) {
    if (result->probes->has_confidence)
      std::fprintf(stderr, "confidence logit %.6f\n", result->probes->confidence);
    if (!result->probes->retrieval.empty())
      std::fprintf(stderr, "retrieval embedding: %zu values (L2-normalised)\n",
                   result->probes->retrieval.size());
  }
  return result->validation && !result->validation->ok() ? cact::tools::kExitCheckFailed
                                                         : cact::tools::kExitOk;
}
