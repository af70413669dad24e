// cact-torch: export a .cact to a runnable TorchScript module (or FP32 safetensors) and
// bring an edited one back without touching what was not edited.
//   cact-torch export IN.cact -o MODEL.pt [--format torchscript|safetensors]
//   cact-torch import MODEL.pt -o OUT.cact [--scheme S] [--force-requantize] [--base BASE.cact]
//   cact-torch run MODEL.pt --tokens 2,17,40 [--window W --sink P] [--logits OUT.npy] [-w N] [-r N]
//   [-t N] [--json]
//   cact-torch info [-t N] [--json]      the BLAS behind libtorch and the threads of both pools
//   cact-torch train --corpus PATHS | --manifest M | --text F --heldout F -o OUT.cact [...]
//   cact-torch eval WEIGHTS.safetensors -f TEXT [--ctx N --chunks N --fake-quant SCHEME]
//   cact-torch finetune BASE.cact --data data.jsonl -o ADAPTER_DIR [--rank 16 --alpha 32 ...]
//   cact-torch --version
// Token lists: tools/common/token_list.h. Every error prints one line on stderr and exits 2.
#include <algorithm>
#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "libtorch/blas_threads.h"
#include "libtorch/bridge.h"
#include "libtorch/torch_module.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/finite_check.h"
#include "lib/file_identity.h"
#include "lib/npy.h"
#include "lib/resources.h"
#include "nlohmann/json.hpp"
#include "quant/scheme.h"
#include "tools/cact-torch/commands.h"
#include "tools/common/cli.h"
#include "tools/common/exit_code.h"
#include "tools/common/token_list.h"

namespace {

using namespace cact;
using namespace cact::torchscript;

constexpr const char* kTool = "cact-torch";

using torch_tool::Fail;

int Export(const std::string& in, const std::string& out, const std::string& format) {
  const Stopwatch clock;
  auto file = CactFile::Open(in);
  if (!file.ok()) return Fail(file.status());
  if (absl::Status finite = CheckFinite(*file); !finite.ok()) return Fail(finite);
  if (format == "safetensors") {
    auto written = ExportSafetensors(*file, out);
    if (!written.ok()) return Fail(written.status());
    for (const std::string& p : *written) std::printf("wrote %s\n", p.c_str());
  } else {
    if (absl::Status s = ExportTorchScript(*file, out); !s.ok()) return Fail(s);
    std::printf("wrote %s\n", out.c_str());
  }
  std::printf("%zu tensors exported in %.2f s\n", file->tensors().size() - 1, clock.Seconds());
  return 0;
}

int Import(ImportRequest req, const std::string& scheme, bool json, bool verbose) {
  if (!scheme.empty()) {
    auto s = ParseScheme(scheme);
    if (!s.ok()) return Fail(s.status());
    req.options.scheme = *s;
  }
  const Stopwatch clock;
  auto r = ImportToCact(req);
  if (!r.ok()) return Fail(r.status());
  if (json) {
    nlohmann::ordered_json j;
    j["input"] = req.input;
    j["output"] = req.output;
    j["kept"] = r->kept();
    j["changed"] = r->changed();
    auto& ts = j["tensors"] = nlohmann::ordered_json::array();
    for (const ReturnDecision& d : r->decisions) {
      ts.push_back({{"name", d.name},
                    {"action", ReturnActionName(d.action)},
                    {"before", d.before},
                    {"after", d.after},
                    {"reason", d.reason},
                    {"edit_rel", d.edit_rel},
                    {"survived", d.survived},
                    {"groups_kept", d.groups_kept},
                    {"groups_reencoded", d.groups_reencoded},
                    {"groups_quantized", d.groups_quantized}});
    }
    j["warnings"] = r->warnings;
    std::printf("%s\n", j.dump(1).c_str());
  } else {
    std::printf("%s", FormatReturnReport(*r, verbose).c_str());
    std::printf("wrote %s in %.2f s\n", req.output.c_str(), clock.Seconds());
  }
  return 0;
}

// The BLAS and thread settings as JSON (run --json, info --json).
nlohmann::ordered_json ThreadsJson(const BlasLibrary& blas, const ThreadSettings& t) {
  return {{"blas",
           {{"vendor", blas.vendor},
            {"library", blas.path},
            {"config", blas.config},
            {"threads", t.blas},
            {"threads_from", t.blas_source}}},
          {"torch",
           {{"intra_op", t.torch_intra},
            {"inter_op", t.torch_interop},
            {"intra_op_from", t.torch_source}}}};
}

// One line on stderr when the BLAS is slow (run prints it once the model has loaded, so an
// error stays the only line).
void WarnAboutBlas(const BlasLibrary& blas) {
  if (std::string w = BlasWarning(blas); !w.empty()) std::fprintf(stderr, "%s\n", w.c_str());
}

int Info(int threads, bool json) {
  const BlasLibrary blas = DescribeBlas();
  WarnAboutBlas(blas);
  const ThreadSettings t = ConfigureThreads(threads);
  if (json) {
    nlohmann::ordered_json j{{"threads", threads}};
    j.update(ThreadsJson(blas, t));
    std::printf("%s\n", j.dump().c_str());
  } else {
    std::printf("%s\n", DescribeThreads(blas, t).c_str());
  }
  return 0;
}

int Run(const std::string& model_path, const std::string& tokens_text,
        std::optional<int64_t> window, int64_t sink, const std::string& logits_path, int warmup,
        int repeat, int threads, bool json) {
  auto ids = tools::ParseTokenIds(tokens_text);
  if (!ids.ok()) return Fail(ids.status());
  const std::vector<int64_t> tokens(ids->begin(), ids->end());
  const BlasLibrary blas = DescribeBlas();
  const ThreadSettings pools = ConfigureThreads(threads);
  const Stopwatch load_clock;
  auto model = TorchModel::Load(model_path);
  if (!model.ok()) return Fail(model.status());
  WarnAboutBlas(blas);
  const double load_s = load_clock.Seconds();
  std::vector<double> times;
  absl::StatusOr<std::vector<float>> logits;
  // The TorchScript profiling executor specialises the graph during the first calls.
  for (int r = 0; r < warmup; ++r) {
    logits = (*model)->Logits(tokens, 1, window, sink);
    if (!logits.ok()) return Fail(logits.status());
  }
  for (int r = 0; r < std::max(1, repeat); ++r) {
    const Stopwatch run_clock;
    logits = (*model)->Logits(tokens, 1, window, sink);
    if (!logits.ok()) return Fail(logits.status());
    times.push_back(run_clock.Seconds());
  }
  const size_t T = tokens.size();
  const size_t vocab = logits->size() / T;
  if (!logits_path.empty()) {
    if (absl::Status s = WriteNpy(logits_path, logits->data(), {T, vocab}); !s.ok()) return Fail(s);
  }
  std::vector<double> sorted = times;
  std::sort(sorted.begin(), sorted.end());
  const double median = sorted[sorted.size() / 2];
  if (json) {
    std::vector<double> ms;
    for (double t : times) ms.push_back(t * 1e3);
    nlohmann::ordered_json j{{"model", model_path},
                             {"tokens", T},
                             {"threads", threads},
                             {"load_ms", load_s * 1e3},
                             {"prefill_ms", ms},
                             {"median_ms", median * 1e3},
                             {"tokens_per_s", double(T) / median}};
    j.update(ThreadsJson(blas, pools));
    std::printf("%s\n", j.dump().c_str());
    std::fflush(stdout);
  }
  std::fprintf(stderr, "%s\n", DescribeThreads(blas, pools).c_str());
  std::fprintf(stderr,
               "load %.1f ms; prefill %zu tokens: median %.2f ms over %zu runs = %.0f tokens/s\n",
               load_s * 1e3, T, median * 1e3, times.size(), double(T) / median);
  return 0;
}

}  // namespace

namespace cact::torch_tool {
// cact-torch exits 2 on every error: a TorchScript call that fails on a loaded module is the
// module's fault, never a check the user asked for.
int Fail(const absl::Status& s) {
  tools::PrintFailure(kTool, s);
  return tools::kExitBadInput;
}
}  // namespace cact::torch_tool

int main(int argc, char** argv) {
  CLI::App app{"cact-torch: .cact <-> TorchScript / safetensors"};
  tools::SetUpTool(app, kTool);
  app.require_subcommand(1);

  std::string ex_in, ex_out, ex_format = "torchscript";
  auto* ex =
      app.add_subcommand("export", "export a .cact to a TorchScript module (or FP32 safetensors)");
  ex->add_option("input", ex_in, "source .cact (or .cact.zst)")->required();
  ex->add_option("-o,--output", ex_out, "MODEL.pt, or for safetensors a directory / *.safetensors")
      ->required();
  ex->add_option("--format", ex_format, "torchscript (default) or safetensors")
      ->check(CLI::IsMember({"torchscript", "safetensors"}));
  ex->footer("Examples:\n  cact-torch export model.cact -o model.pt\n"
             "  cact-torch export model.cact --format safetensors -o weights/");

  ImportRequest req;
  std::string im_scheme, im_base;
  bool im_json = false, im_verbose = false;
  auto* im = app.add_subcommand("import", "bring an (edited) exported model back to .cact");
  im->add_option("input", req.input, "MODEL.pt, model.safetensors or an export directory")
      ->required();
  im->add_option("-o,--output", req.output, "output .cact (.cact.zst compresses)")->required();
  im->add_option("--scheme", im_scheme, "new widths, e.g. embedding=4,mhc=4,default=2");
  im->add_flag("--force-requantize", req.options.force_requantize, "quantize every tensor again");
  im->add_option("--base", im_base, "the source .cact, for safetensors input");
  im->add_flag("--json", im_json, "print the report as JSON");
  im->add_flag("-v,--verbose", im_verbose, "list kept tensors too");
  im->footer("Examples:\n  cact-torch import edited.pt -o edited.cact\n"
             "  cact-torch import weights/ --base model.cact -o edited.cact");

  std::string run_model, run_tokens, run_logits;
  int64_t run_window = 0, run_sink = 0;
  int run_repeat = 1, run_threads = 0, run_warmup = 0;
  auto* run = app.add_subcommand(
      "run", "run an exported module with libtorch (prefill of the given tokens)");
  run->add_option("model", run_model, "MODEL.pt")->required();
  run->add_option("--tokens", run_tokens, "comma-separated token ids")->required();
  run->add_option("--window", run_window, "attention window (0 = plain causal)")
      ->check(tools::WholeIn(0, INT32_MAX));
  run->add_option("--sink", run_sink, "pinned first positions (with --window)")
      ->check(tools::WholeIn(0, INT32_MAX));
  run->add_option("--logits", run_logits, "write [T, vocab] float32 logits to this .npy");
  run->add_option("-r,--repeat", run_repeat, "run the prefill N times and report the median")
      ->check(tools::WholeIn(1, 100000));
  run->add_option("-w,--warmup", run_warmup,
                  "untimed runs first (TorchScript optimises during the first 2)")
      ->check(tools::WholeIn(0, 100000));
  run->add_option("-t,--threads", run_threads,
                  "threads for the matrix products (0: the CPUs available; see "
                  "docs/cact-torch.md, Threads)")
      ->check(tools::WholeIn(0, 256));
  bool run_json = false;
  run->add_flag("--json", run_json, "also print the timings as one JSON line on stdout");
  run->footer("Example:\n  cact-torch run model.pt --tokens 2,17,40 --logits logits.npy");

  int info_threads = 0;
  bool info_json = false;
  auto* info = app.add_subcommand(
      "info", "name the BLAS behind libtorch and the threads of both pools (after the rule)");
  info->add_option("-t,--threads", info_threads, "as for run")->check(tools::WholeIn(0, 256));
  info->add_flag("--json", info_json, "print one JSON line");
  info->footer("Example:\n  cact-torch info -t 2");

  cact::torch_tool::TrainCommand train;
  train.Add(app);
  cact::torch_tool::FinetuneCommand finetune;
  finetune.Add(app);
  cact::torch_tool::EvalCommand eval;
  eval.Add(app);

  app.footer("Example:\n  cact-torch export model.cact -o model.pt\n"
             "Every subcommand has its own --help; docs/cact-torch.md has the details.");

  if (auto code = tools::ParseCommandLine(app, argc, argv)) return *code;
  // Outputs never replace inputs: refused before any work.
  struct OutputOf {
    const std::string& output;
    std::vector<std::string> inputs;
    const char* role;
  };
  for (const OutputOf& o : {OutputOf{ex_out, {ex_in}, "-o"},
                            OutputOf{req.output, {req.input, im_base}, "-o"},
                            OutputOf{run_logits, {run_model}, "--logits"}}) {
    if (absl::Status st = CheckOutputIsNotInput(o.output, o.inputs, o.role); !st.ok())
      return Fail(st);
  }
  if (train.chosen()) return train.Run();
  if (finetune.chosen()) return finetune.Run();
  if (eval.chosen()) return eval.Run();
  if (*info) return Info(info_threads, info_json);
  if (*ex) return Export(ex_in, ex_out, ex_format);
  if (*im) {
    if (!im_base.empty()) req.base = im_base;
    return Import(req, im_scheme, im_json, im_verbose);
  }
  std::optional<int64_t> window;
  if (run_window > 0) window = run_window;
  return Run(run_model, run_tokens, window, run_sink, run_logits, run_warmup, run_repeat,
             run_threads, run_json);
}
