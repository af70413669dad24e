
#include "absl/strings/str_join.h"
#include "lib/status.h"
#include "quant/build.h"
#include "quant/synthetic.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {

int RunSynth(const Options& o) {
  Reporter rep(o);
  PhaseTimer timer;
  absl::StatusOr<SyntheticPreset> preset = FindSyntheticPreset(o.geometry);
  if (!preset.ok()) return rep.Fail(preset.status());
  if (absl::Status s = CheckKvWindow(o, preset->geometry.max_seq_len); !s.ok())
    return rep.Fail(s);
  BuildRequest req;
  if (!o.scheme.empty()) {
    absl::StatusOr<Scheme> s = ParseScheme(o.scheme);
    if (!s.ok()) return rep.Fail(s.status());
    req.scheme = *s;
  }
  absl::StatusOr<TokenizerBlob> tokenizer = SyntheticTokenizer(*preset);
  if (!tokenizer.ok()) return rep.Fail(tokenizer.status());
  const Safetensors weights = GenerateSyntheticWeights(*preset, o.seed);
  if (!o.weights_out.empty() && !o.dry_run) {
    if (absl::Status st = WriteSafetensors(o.weights_out, weights); !st.ok())
      return rep.Fail(st);
  }
  req.weights = &weights;
  req.weights_path = "synthetic " + o.geometry + " (seed " + std::to_string(o.seed) + ")";
  req.tokenizer = std::move(*tokenizer);
  req.tokenizer_source = o.geometry + " tokenizer (built in)";
  req.kv_window = o.kv_window.value_or(0);
  rep.Configure(&req);
  RebuildReport report = rep.StartRebuild("synth", &timer);
  const absl::StatusOr<CactContents> contents = BuildCact(req, &report, rep.Progress());
  if (!o.weights_out.empty()) report.notes.push_back("float weights written to " + o.weights_out);
  return rep.Complete(contents, &report, &timer);
}

}  // namespace cact::quant_tool
