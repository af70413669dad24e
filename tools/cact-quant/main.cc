// cact-quant: build, requantize and LoRA-rebuild .cact files; print codebooks.
//
//   cact-quant codebook --bits {2,3,4,1.58} --group N
//   cact-quant build --weights W.safetensors -o OUT.cact [--scheme S | --preset NAME] [--group N]
//                    [--tokenizer F.model | --base BASE.cact] [--kv-window N] [--dry-run]
//   cact-quant build --checkpoint CKPT.pkl [--lora ADAPTER.pkl] -o OUT.cact
//                    [--tokenizer F.model | --base BASE.cact] [--scheme S]
//   cact-quant requant IN.cact {--scheme S | --preset NAME} -o OUT.cact
//   cact-quant presets [--json]   (named schemes, their needle2 size, quality cost, exact calls)
//   cact-quant lora BASE.cact --adapter {DIR,A.safetensors,A.pkl} [--adapter-config C.json]
//                   [--scheme S | --preset NAME]  (default: the adapter's QAT metadata)
//                   [--scale X] [--allow-large-update] -o OUT.cact
//   cact-quant synth --geometry needle2 [--seed N] -o OUT.cact
//   cact-quant dequant IN.cact -o WEIGHTS.safetensors  (the float weights to edit / fine-tune)
//   cact-quant convert CKPT.pkl [--lora ADAPTER.pkl] -o WEIGHTS.safetensors
//   cact-quant --version
// Every subcommand takes --json; outputs ending in .zst are zstd-compressed.
#include <cstdint>
#include <string>

#include "absl/strings/str_format.h"
#include "quant/import/lora.h"
#include "tools/cact-quant/commands.h"
#include "tools/common/cli.h"

namespace {

using cact::quant_tool::Options;

// --kv-window: a whole number >= 1; the upper bound (the model's max_seq_len) is checked
// once the model is known.
CLI::Validator KvWindowValue() {
  return CLI::Validator(
      [](std::string& s) -> std::string {
        uint64_t v = 0;
        if (!CLI::detail::lexical_cast(s, v) || v > UINT32_MAX)
          return "must be a whole number in [1, max_seq_len], got '" + s + "'";
        if (v == 0)
          return "must be >= 1 (cact-quant does not write the format's 0, no window; leave the "
                 "flag out to keep the input's window)";
        return {};
      },
      "1..max_seq_len");
}

// The flags of every command that writes a .cact. `kv_window`: whether the command can set
// the header's window (lora keeps the base's header).
void CommonOutput(CLI::App* c, Options& o, bool kv_window = true) {
  c->add_option("-o,--output", o.output,
                "output .cact (a name ending in .zst is zstd-compressed)")
      ->required();
  c->add_flag("--json", o.json,
              "print the report as JSON (keys in docs/cact-quant.md); no progress lines");
  c->add_flag("-q,--quiet", o.quiet, "no per-tensor progress lines");
  c->add_flag("--dry-run", o.dry_run, "print the plan and the final size; write nothing");
  c->add_option("--zstd-level", o.zstd_level, "zstd level for .zst outputs")
      ->check(cact::tools::WholeIn(1, 22));
  c->add_flag("--exporter-rotation", o.exporter_rotation,
              "rotate in the official exporter's summation order (numpy on the reference BLAS): "
              "bit-identical "
              "codes on any model, about twice the CPU time of the FWHT default");
  if (kv_window)
    c->add_option("--kv-window", o.kv_window,
                  "header kv_window, 1 to the model's max_seq_len (default: keep the input's / "
                  "take the weights')")
        ->check(KvWindowValue());
}

// The flags of a command that writes a safetensors file (dequant, convert).
void SafetensorsOutput(CLI::App* c, Options& o) {
  c->add_option("-o,--output", o.output, "output .safetensors")->required();
  c->add_flag("--json", o.json, "print the summary as JSON");
  c->add_flag("-q,--quiet", o.quiet, "accepted like every command (no progress lines to drop)");
  c->add_flag("--dry-run", o.dry_run, "read and convert everything, print the summary; write "
                                      "nothing");
}

// --preset NAME next to (never with) --scheme; the footer lists the presets for --help.
void SchemePreset(CLI::App* c, CLI::Option* scheme, Options& o) {
  c->add_option("--preset", o.scheme_preset,
                "named scheme (`cact-quant presets`; listed below), instead of --scheme")
      ->excludes(scheme);
  c->footer(&cact::quant_tool::PresetHelp);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{
      "cact-quant: quantize float weights into .cact files, change widths, merge LoRA adapters"};
  cact::tools::SetUpTool(app, "cact-quant");
  app.require_subcommand(1);
  app.footer("Example:\n  cact-quant requant model.cact --preset cq4 -o model-cq4.cact\n"
             "Every subcommand has its own --help; docs/cact-quant.md has the details.");
  Options o;

  auto* codebook =
      app.add_subcommand("codebook", "print the Lloyd-Max codebook the exporter embeds");
  codebook->add_option("--bits", o.bits, "2, 3, 4 or 1.58")->required();
  codebook->add_option("--group", o.group, "group size (power of two, 8 to 65536)")->required();
  codebook->add_flag("--json", o.json, "JSON output");
  codebook->footer("Example:\n  cact-quant codebook --bits 2 --group 128");

  auto* build = app.add_subcommand("build", "quantize float weights (safetensors) into a .cact");
  build->add_option("--weights", o.weights,
                    "float weights: canonical names, [out, in] (like the fixtures')");
  build->add_option("--checkpoint", o.checkpoint,
                    "or the official training checkpoint (.pkl), read without running any of it");
  build->add_option("--lora", o.lora_adapter,
                    "official LoRA adapter (.pkl) merged into --checkpoint as `needle build` does");
  build->add_option("--scale", o.scale, "--lora merge scale (default: the adapter's)")
      ->check(cact::tools::FiniteNumber());
  auto* build_scheme =
      build->add_option("--scheme", o.scheme,
                        "bits map, e.g. embedding=4,mhc=4,default=2 (default: the base's "
                        "widths, the weights' bits_map, or that default; for --checkpoint the "
                        "config's weight_bits, else 4 bits)");
  SchemePreset(build, build_scheme, o);
  build->add_option("--group", o.group,
                    "CQ group, a power of two (default: the base's, the metadata's, else 128)");
  build->add_option("--tokenizer", o.tokenizer, "SentencePiece .model for the RAW tokenizer");
  build->add_option("--base", o.base,
                    "base .cact: geometry, tokenizer, widths, and bytes kept for unchanged "
                    "tensors (with --checkpoint: the tokenizer only)");
  build->add_option("--config", o.config, "official config JSON when the weights carry none");
  build->add_flag("--exact", o.exact, "keep base bytes only for bitwise-equal values");
  build->add_flag("--force-requantize", o.force_requantize, "quantize every tensor, keep nothing");
  build
      ->add_option("--keep-tolerance", o.keep_tolerance,
                   "keep base bytes when max|w - base| <= this x max|base| (default 4e-6)")
      ->check(cact::tools::FiniteIn(0.0, 1.0));
  CommonOutput(build, o);
  build->footer(
      "Example:\n  cact-quant build --weights tuned.safetensors --base base.cact -o tuned.cact");

  auto* requant =
      app.add_subcommand("requant", "change the widths of a .cact (unchanged widths are copied)");
  requant->add_option("input", o.input, "input .cact / .cact.zst")->required();
  SchemePreset(requant, requant->add_option("--scheme", o.scheme, "new bits map"), o);
  CommonOutput(requant, o);
  requant->footer("Example:\n  cact-quant requant model.cact --preset cq4 -o model-cq4.cact");

  auto* presets = app.add_subcommand(
      "presets", "list the named schemes with their size on the released geometry");
  presets->add_flag("--json", o.json, "JSON output");
  presets->footer("Example:\n  cact-quant presets --json");

  auto* lora = app.add_subcommand("lora", "merge a LoRA adapter into the attention projections");
  lora->add_option("base", o.input, "base .cact / .cact.zst")->required();
  lora->add_option("--adapter", o.adapter,
                   "adapter: a PEFT directory (adapter_model.safetensors + adapter_config.json), "
                   "safetensors (PEFT or stacked layout) or the official .pkl")
      ->required();
  lora->add_option("--adapter-config", o.adapter_config,
                   "PEFT adapter_config.json (lora_alpha, r, use_rslora) (default: the one "
                   "beside the adapter's safetensors, if any)");
  lora->add_option("--scale", o.scale, "merge scale (overrides the config / metadata)")
      ->check(cact::tools::FiniteNumber());
  lora->add_flag("--allow-large-update", o.allow_large_update,
                 absl::StrFormat("merge even an update far larger than its weight (|dW|/|W| > "
                                 "%g), refused otherwise",
                                 cact::kMaxLoraUpdateRatio));
  lora->add_flag("--exporter-rule", o.exporter_rule,
                 "quantize each merged tensor afresh by the exporter's rule (as needle build "
                 "does after a merge into the float checkpoint) instead of re-encoding it over "
                 "the base's bytes group by group");
  SchemePreset(lora,
               lora->add_option("--scheme", o.scheme,
                                "widths to deploy (default: the adapter's QAT metadata, else the "
                                "base's); a matrix whose width changes is quantized afresh"),
               o);
  CommonOutput(lora, o, /*kv_window=*/false);
  lora->footer("Example:\n  cact-quant lora base.cact --adapter peft_run/ -o tuned.cact");

  auto* synth =
      app.add_subcommand("synth", "generate a deterministic synthetic model and quantize it");
  synth->add_option("--geometry", o.geometry, "needle2 (released geometry) or small");
  // The old name of --geometry (`--preset` is a scheme in build and requant): kept, hidden.
  synth->add_option("--preset", o.geometry, "deprecated: --geometry")->group("");
  synth->add_option("--seed", o.seed, "weight seed");
  synth->add_option("--scheme", o.scheme, "bits map (default embedding=4,mhc=4,default=2)");
  synth->add_option("--weights-out", o.weights_out, "also write the float weights (safetensors)");
  CommonOutput(synth, o);
  synth->footer("Example:\n  cact-quant synth --geometry needle2 --seed 1 -o needle2.cact");

  auto* dequant = app.add_subcommand("dequant",
                                     "write every tensor's dequantized values as one safetensors "
                                     "(canonical names, [out, in], config in the metadata)");
  dequant->add_option("input", o.input, "input .cact / .cact.zst")->required();
  dequant->add_option("--dtype", o.dequant_dtype, "F32 (exact), F16 or BF16");
  SafetensorsOutput(dequant, o);
  dequant->footer("Example:\n  cact-quant dequant model.cact -o weights.safetensors");

  auto* convert = app.add_subcommand(
      "convert",
      "official checkpoint (.pkl) -> canonical float weights (safetensors, [out, in], config in "
      "the metadata) for PyTorch and `build --weights`");
  convert->add_option("checkpoint", o.input, "checkpoint .pkl")->required();
  convert->add_option("--lora", o.lora_adapter, "official LoRA adapter (.pkl) to merge first");
  convert->add_option("--scale", o.scale, "--lora merge scale (default: the adapter's)")
      ->check(cact::tools::FiniteNumber());
  convert->add_option("--dtype", o.dtype,
                      "F32, F16 or BF16 (default: F16 for a float16 checkpoint, else F32)");
  SafetensorsOutput(convert, o);
  convert->footer("Example:\n  cact-quant convert needle2.pkl -o weights.safetensors");

  if (auto code = cact::tools::ParseCommandLine(app, argc, argv)) return *code;
  // Outputs never replace inputs: refused before any work.
  if (*build || *requant || *lora || *synth || *dequant || *convert) {
    if (absl::Status s = cact::quant_tool::CheckOutputsAreNotInputs(o); !s.ok())
      return cact::tools::ReportFailure("cact-quant", s);
  }
  if (*codebook) return cact::quant_tool::RunCodebook(o);
  if (*build) return cact::quant_tool::RunBuild(o);
  if (*requant) return cact::quant_tool::RunRequant(o);
  if (*presets) return cact::quant_tool::RunPresets(o);
  if (*lora) return cact::quant_tool::RunLora(o);
  if (*synth) return cact::quant_tool::RunSynth(o);
  if (*dequant) return cact::quant_tool::RunDequant(o);
  if (*convert) return cact::quant_tool::RunConvert(o);
  return 2;
}
