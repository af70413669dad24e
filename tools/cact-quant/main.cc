// cact-quant: build, requantize and LoRA-rebuild .cact files; print codebooks.
//
//   cact-quant codebook --bits {2,3,4,1.58} --group N
//   cact-quant build --weights W.safetensors -o OUT.cact [--scheme S | --preset NAME] [--group N]
//                    [--tokenizer F.model | --base BASE.cact] [--kv-window N] [--dry-run]
//   cact-quant build --checkpoint CKPT.pkl [--lora ADAPTER.pkl] -o OUT.cact
//                    [--tokenizer F.model | --base BASE.cact] [--scheme S]
//   cact-quant requant IN.cact {--scheme S | --preset NAME} -o OUT.cact
//   cact-quant presets [--json]   (named schemes, their needle2 size and quality cost)
//   cact-quant lora BASE.cact --adapter A.{safetensors,pkl} [--adapter-config C.json]
//                   [--scale X] -o OUT.cact
//   cact-quant synth --preset needle2 [--seed N] -o OUT.cact
//   cact-quant dequant IN.cact -o WEIGHTS.safetensors  (the float weights to edit / fine-tune)
//   cact-quant convert CKPT.pkl [--lora ADAPTER.pkl] -o WEIGHTS.safetensors
//   cact-quant --version
// Every subcommand takes --json; outputs ending in .zst are zstd-compressed.
#include <string>

#include "tools/cact-quant/commands.h"
#include "tools/common/cli.h"

namespace {

using cact::quant_tool::Options;

void CommonOutput(CLI::App* c, Options& o, bool needs_output = true) {
  auto* out = c->add_option("-o,--output", o.output,
                            "output .cact (a name ending in .zst is zstd-compressed)");
  if (needs_output) out->required();
  c->add_flag("--json", o.json,
              "print the report as JSON (keys in docs/cact-quant.md); no progress lines");
  c->add_flag("-q,--quiet", o.quiet, "no per-tensor progress lines");
  c->add_flag("--dry-run", o.dry_run, "print the plan and the final size; write nothing");
  c->add_option("--zstd-level", o.zstd_level, "zstd level for .zst outputs")
      ->check(CLI::Range(1, 22));
  c->add_flag("--exporter-rotation", o.exporter_rotation,
              "rotate in the official exporter's summation order (numpy on the reference BLAS): "
              "bit-identical "
              "codes on any model, about twice the CPU time of the FWHT default");
  c->add_option("--kv-window", o.kv_window, "header kv_window (default: keep / from the weights)");
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
  Options o;

  auto* codebook =
      app.add_subcommand("codebook", "print the Lloyd-Max codebook the exporter embeds");
  codebook->add_option("--bits", o.bits, "2, 3, 4 or 1.58")->required();
  codebook->add_option("--group", o.group, "group size (power of two)")->required();
  codebook->add_flag("--json", o.json, "JSON output");

  auto* build = app.add_subcommand("build", "quantize float weights (safetensors) into a .cact");
  build->add_option("--weights", o.weights,
                    "float weights: canonical names, [out, in] (like the fixtures')");
  build->add_option("--checkpoint", o.checkpoint,
                    "or the official training checkpoint (.pkl), read without running any of it");
  build->add_option("--lora", o.lora_adapter,
                    "official LoRA adapter (.pkl) merged into --checkpoint as `needle build` does");
  build->add_option("--scale", o.scale, "--lora merge scale (default: the adapter's)");
  auto* build_scheme =
      build->add_option("--scheme", o.scheme,
                        "bits map, e.g. embedding=4,mhc=4,default=2 (default: the base's "
                        "widths, the weights' bits_map, or that default; for --checkpoint the "
                        "config's weight_bits, else 4 bits)");
  SchemePreset(build, build_scheme, o);
  build->add_option("--group", o.group, "CQ group (default: base, metadata, 128)")
      ->each([&](const std::string&) { o.group_given = true; });
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
      ->check(CLI::Range(0.0, 1.0));
  CommonOutput(build, o);

  auto* requant =
      app.add_subcommand("requant", "change the widths of a .cact (unchanged widths are copied)");
  requant->add_option("input", o.input, "input .cact / .cact.zst")->required();
  SchemePreset(requant, requant->add_option("--scheme", o.scheme, "new bits map"), o);
  CommonOutput(requant, o);

  auto* presets = app.add_subcommand(
      "presets", "list the named schemes with their size on the released geometry");
  presets->add_flag("--json", o.json, "JSON output");

  auto* lora = app.add_subcommand("lora", "merge a LoRA adapter into the attention projections");
  lora->add_option("base", o.input, "base .cact / .cact.zst")->required();
  lora->add_option("--adapter", o.adapter,
                   "adapter: safetensors (PEFT or stacked layout) or the official .pkl")
      ->required();
  lora->add_option("--adapter-config", o.adapter_config,
                   "PEFT adapter_config.json (lora_alpha, r, use_rslora)");
  lora->add_option("--scale", o.scale, "merge scale (overrides the config / metadata)");
  CommonOutput(lora, o);

  auto* synth =
      app.add_subcommand("synth", "generate a deterministic synthetic model and quantize it");
  synth->add_option("--preset", o.preset, "needle2 (released geometry) or small");
  synth->add_option("--seed", o.seed, "weight seed");
  synth->add_option("--scheme", o.scheme, "bits map (default embedding=4,mhc=4,default=2)");
  synth->add_option("--weights-out", o.weights_out, "also write the float weights (safetensors)");
  CommonOutput(synth, o);

  auto* dequant = app.add_subcommand("dequant",
                                     "write every tensor's dequantized values as one safetensors "
                                     "(canonical names, [out, in], config in the metadata)");
  dequant->add_option("input", o.input, "input .cact / .cact.zst")->required();
  dequant->add_option("-o,--output", o.output, "output .safetensors")->required();
  dequant->add_option("--dtype", o.dtype, "F32 (default; exact), F16 or BF16");
  dequant->add_flag("--json", o.json, "JSON summary");

  auto* convert = app.add_subcommand(
      "convert",
      "official checkpoint (.pkl) -> canonical float weights (safetensors, [out, in], config in "
      "the metadata) for PyTorch and `build --weights`");
  convert->add_option("checkpoint", o.input, "checkpoint .pkl")->required();
  convert->add_option("--lora", o.lora_adapter, "official LoRA adapter (.pkl) to merge first");
  convert->add_option("--scale", o.scale, "--lora merge scale (default: the adapter's)");
  convert->add_option("-o,--output", o.output, "output .safetensors")->required();
  convert->add_option("--dtype", o.dtype,
                      "F32, F16 or BF16 (default: F16 for a float16 checkpoint, else F32)");
  convert->add_flag("--json", o.json, "JSON summary");

  if (auto code = cact::tools::ParseCommandLine(app, argc, argv)) return *code;
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
