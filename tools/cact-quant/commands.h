// cact-quant subcommands. Argument parsing and printing only: every decision lives in
// quant/ (build.h, requant.h, lora.h, codebook.h, synthetic.h).
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "formats/cact/writer.h"
#include "lib/resources.h"
#include "quant/build.h"
#include "quant/rebuild_report.h"

namespace cact::quant_tool {

struct Options {
  // common
  bool json = false, quiet = false, dry_run = false;
  std::string output;
  int zstd_level = 19;
  bool exporter_rotation = false;
  std::optional<uint32_t> kv_window;  // unset: keep the input's / take the weights'
  // codebook (group also build)
  std::string bits;
  std::optional<uint32_t> group;  // build: unset = the base's, the metadata's, or 128
  // build
  std::string weights, scheme, tokenizer, base, config;
  std::string scheme_preset;             // build / requant --preset (quant/scheme_presets.h)
  std::string checkpoint, lora_adapter;  // build --checkpoint CKPT.pkl [--lora ADAPTER.pkl]
  bool exact = false, force_requantize = false;
  std::optional<double> keep_tolerance;
  // requant / lora
  std::string input, adapter, adapter_config;
  std::optional<double> scale;
  bool allow_large_update = false;
  bool exporter_rule = false;  // lora: merged tensors quantized afresh, not re-encoded
  // synth
  std::string geometry = "needle2", weights_out;
  // dequant ("F32"), convert ("" = the checkpoint's own dtype)
  std::string dtype, dequant_dtype = "F32";
  uint64_t seed = 1;
};

// Before reading float weights from `path`: heap room (on huge pages) for about twice its
// size, what they become as float32 tensors (lib/heap_reserve.h). CACT_NO_HEAP_RESERVE=1
// turns it off (to measure it).
void ReserveForWeightsIn(const std::string& path);

// --scheme or --preset as a Scheme; nullopt when neither was given (CLI11 refuses both).
absl::StatusOr<std::optional<Scheme>> ChosenScheme(const Options& o);
// Where the scheme came from, for the report: "--preset NAME" or "--scheme".
std::string SchemeSource(const Options& o);
// The --help footer of build and requant: every preset with its size and quality cost.
std::string PresetHelp();

// Refuses (FailedPrecondition, before any work) an output that is one of the command's
// inputs under any name: -o or --weights-out against every input flag.
absl::Status CheckOutputsAreNotInputs(const Options& o);
// CactFile::Open, then every stored value finite: a command computing from a NaN would
// spread it (or, copying it, have the writer refuse it only after all the work).
absl::StatusOr<CactFile> OpenFiniteCact(const std::string& path);
// Refuses --kv-window beyond the model's positions (the header may not claim more).
absl::Status CheckKvWindow(const Options& o, uint32_t max_seq_len);

int RunCodebook(const Options& o);
int RunPresets(const Options& o);
int RunBuild(const Options& o);
int RunRequant(const Options& o);
int RunLora(const Options& o);
int RunSynth(const Options& o);
int RunDequant(const Options& o);
int RunConvert(const Options& o);

// Phase timing for the report: wall and process CPU seconds per phase, wall in total.
class PhaseTimer {
 public:
  double Lap() { return lap_.Lap(); }  // wall seconds since the previous Lap (or construction)
  double CpuLap();  // process CPU seconds (all threads) since the previous CpuLap
  double Total() const { return total_.Seconds(); }

 private:
  Stopwatch total_, lap_;
  double last_cpu_ = ProcessCpuSeconds();
};

// Shared output: progress line per tensor (stderr, unless --json/--quiet), the summary or
// JSON on stdout, and errors as one line on stderr with the exit status.
class Reporter {
 public:
  explicit Reporter(const Options& o) : o_(o) {}
  void Tensor(size_t index, size_t total, const TensorOutcome& t) const;
  // Tensor() as the callback the quant/ rebuilds take.
  TensorCallback Progress() const {
    return [this](size_t i, size_t n, const TensorOutcome& t) { Tensor(i, n, t); };
  }
  // The rebuild request fields every command sets from the common flags.
  template <typename Request>
  void Configure(Request* req) const {
    req->rotation = o_.exporter_rotation ? CqRotation::kExporter : CqRotation::kFwht;
    req->dry_run = o_.dry_run;
  }
  // The inputs are read: their time opens `command`'s report, the CPU clock restarts.
  RebuildReport StartRebuild(const char* command, PhaseTimer* timer) const;
  int Finish(const RebuildReport& r) const;
  // The common tail: time the work, write the output (or only size it for --dry-run), print.
  int Complete(const absl::StatusOr<CactContents>& contents, RebuildReport* report,
               PhaseTimer* timer) const;
  // One line "cact-quant: message" on stderr; the exit code of tools/common/exit_code.h.
  int Fail(const absl::Status& st) const;

 private:
  const Options& o_;
};

}  // namespace cact::quant_tool
