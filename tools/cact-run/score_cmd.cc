#include "tools/cact-run/score_cmd.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>

#include "absl/strings/str_format.h"
#include "engine/eval/perplexity.h"
#include "lib/atomic_file.h"
#include "lib/file_identity.h"
#include "lib/progress.h"
#include "tools/cact-run/kld_histogram.h"
#include "tools/cact-run/tool_name.h"
#include "tools/common/cli.h"
#include "tools/common/exit_code.h"

namespace cact {
namespace {

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f)
    return absl::InvalidArgumentError(path + ": cannot read the text file: " +
                                      std::strerror(errno));
  std::ostringstream ss;
  ss << f.rdbuf();
  if (f.bad()) return absl::InvalidArgumentError(path + ": read error");
  return ss.str();
}

// Flags both commands take.
struct ScoringFlags {
  std::string file, path = "auto";
  ScoringOptions options;
  uint32_t window = 0;
  CLI::Option* window_opt = nullptr;
  bool json = false, quiet = false;

  void Add(CLI::App& app) {
    app.add_option("-f,--file", file, "text file to score (UTF-8)")->required();
    app.add_option("-c,--ctx", options.ctx,
                   "positions per chunk, BOS included, 2 to max_seq_len")
        ->check(tools::WholeIn(2, UINT32_MAX))
        ->default_str("min(max_seq_len, 512)");
    app.add_option("--path", path,
                   "forward path: fast, fast-int8 (plain int8 numerics), ref (FP32 reference) "
                   "or auto (fast)")
        ->check(CLI::IsMember({"fast", "fast-int8", "ref", "reference", "auto"}));
    app.add_option("-t,--threads", options.threads,
                   "threads (default: the CPUs this process may use, at most 8); chunks run "
                   "in parallel, one per thread")
        ->check(tools::WholeIn(1, 256))
        ->default_str("auto");
    window_opt = app.add_option("--window", window,
                                "attention window W, 0 (causal) to max_seq_len")
                     ->check(tools::WholeIn(0, UINT32_MAX))
                     ->default_str("header kv_window");
    app.add_option("--sink", options.sink, "pinned first positions of each chunk, 0 to --ctx")
        ->check(tools::WholeIn(0, UINT32_MAX));
    app.add_option("--chunks", options.max_chunks, "score only the first N chunks (0 = all)")
        ->check(tools::WholeIn(0, UINT32_MAX));
    app.add_flag("--json", json, "print one JSON object on stdout");
    app.add_flag("-q,--quiet", quiet, "no progress lines on stderr");
  }
  void Finish() {
    options.path = path;
    if (*window_opt) options.window = window;
  }
  // "[ 3/17] PPL 12.3456 over 1,533 tokens, 2,950 tokens/s" per finished chunk.
  ProgressFn MakeProgress(const char* label, std::unique_ptr<Progress>& holder) const {
    if (quiet) return {};
    return [label, &holder](const ScoringProgress& p) {
      if (!holder) holder = std::make_unique<Progress>(label, p.chunks_total);
      holder->Step(p.chunks_done,
                   absl::StrFormat("%s %s over %d tokens, %.0f tokens/s", label,
                                   FormatPerplexity(std::exp(p.nll_sum / double(p.tokens_done))),
                                   p.tokens_done,
                                   p.seconds > 0 ? p.tokens_done / p.seconds : 0));
    };
  }
};

// Parses the command line, reads the text, runs `score(text, progress)`, lets `finish`
// write extra outputs, and prints the report.
// `before` checks the command line once parsed, before any work.
template <typename Score, typename Finish>
int ScoreAndPrint(CLI::App& app, int argc, char** argv, ScoringFlags& flags, const char* label,
                  Score score, Finish finish,
                  const std::function<absl::Status()>& before = nullptr) {
  if (auto code = tools::ParseCommandLine(app, argc, argv)) return *code;
  flags.Finish();
  if (before) {
    if (absl::Status st = before(); !st.ok()) return tools::ReportFailure(kTool, st);
  }
  auto text = ReadTextFile(flags.file);
  if (!text.ok()) return tools::ReportFailure(kTool, text.status());
  std::unique_ptr<Progress> progress;
  auto report = score(*text, flags.MakeProgress(label, progress));
  if (!report.ok()) return tools::ReportFailure(kTool, report.status());
  if (absl::Status st = finish(*report); !st.ok()) return tools::ReportFailure(kTool, st);
  std::printf("%s\n", flags.json ? report->ToJson().c_str() : report->ToText().c_str());
  return tools::kExitOk;
}

}  // namespace

int PerplexityMain(int argc, char** argv) {
  CLI::App app{
      "cact-run perplexity: how well a model predicts a text (llama-perplexity style). The text "
      "is cut into chunks of ctx-1 tokens, each fed after BOS; every token is scored from its "
      "chunk's prefix."};
  tools::SetUpTool(app, "cact-run perplexity", kTool);
  std::string model;
  ScoringFlags flags;
  app.add_option("model", model, ".cact or .cact.zst model")->required();
  flags.Add(app);
  app.footer("Example:\n  cact-run perplexity model.cact -f wiki.test.txt --ctx 512");
  return ScoreAndPrint(
      app, argc, argv, flags, "PPL",
      [&](std::string_view text, const ProgressFn& p) {
        return ComputePerplexity(model, text, flags.options, p);
      },
      [](const PerplexityReport&) { return absl::OkStatus(); });
}

int CompareMain(int argc, char** argv) {
  CLI::App app{
      "cact-run compare: how far OTHER's predictions moved from BASE's on the same text: "
      "KL(P_base || P_other) per token, top-1 agreement, the correct token's probability, "
      "both perplexities (llama-perplexity --kl-divergence style)"};
  tools::SetUpTool(app, "cact-run compare", kTool);
  std::string base, other, svg;
  ScoringFlags flags;
  app.add_option("base", base, "the base model (.cact)")->required();
  app.add_option("other", other, "the model to compare with it (same tokenizer)")->required();
  flags.Add(app);
  app.add_option("--svg", svg, "also write an SVG histogram of the per-token KL divergence");
  app.add_option("--other-path", flags.options.other_path,
                 "OTHER's forward path (default: --path's), e.g. --path ref --other-path fast "
                 "with BASE = OTHER measures the fast path against the reference")
      ->check(CLI::IsMember({"fast", "fast-int8", "ref", "reference", "auto"}));
  app.footer("Example:\n  cact-run compare model.cact model-cq4.cact -f wiki.test.txt --svg kld.svg");
  return ScoreAndPrint(
      app, argc, argv, flags, "PPL(base)",
      [&](std::string_view text, const ProgressFn& p) {
        return CompareModels(base, other, text, flags.options, p);
      },
      [&](const CompareReport& report) {
        if (svg.empty()) return absl::OkStatus();
        const std::string doc = KldHistogramSvg(report);
        return WriteFileAtomic(svg, std::span<const uint8_t>(
                                        reinterpret_cast<const uint8_t*>(doc.data()), doc.size()));
      },
      [&] { return CheckOutputIsNotInput(svg, {base, other, flags.file}, "--svg"); });
}

}  // namespace cact
