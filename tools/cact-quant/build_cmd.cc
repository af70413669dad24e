#include <fstream>
#include <sstream>

#include "absl/strings/match.h"
#include "formats/sentencepiece_model.h"
#include "formats/tokenizer_blob.h"
#include "quant/build.h"
#include "quant/import/flax_checkpoint.h"
#include "tools/cact-quant/commands.h"

namespace cact::quant_tool {
namespace {

// A .cact where another kind of file belongs: the error says what to do instead.
absl::Status WithCactHint(const absl::Status& s, const std::string& hint) {
  if (!absl::StrContains(s.message(), "is a .cact model")) return s;
  return absl::Status(s.code(), std::string(s.message()) + " (" + hint + ")");
}

absl::StatusOr<std::string> ReadText(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::InvalidArgumentError(path + ": cannot open");
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

}  // namespace

int RunBuild(const Options& o) {
  Reporter rep(o);
  PhaseTimer timer;
  // Everything the user typed is checked before any work.
  BuildRequest req;
  absl::StatusOr<std::optional<Scheme>> scheme = ChosenScheme(o);
  if (!scheme.ok()) return rep.Fail(scheme.status());
  req.scheme = *scheme;
  if (o.group) {
    if (!IsValidCqGroup(*o.group))
      return rep.Fail(absl::InvalidArgumentError("--group " + std::to_string(*o.group) +
                                                 " is not a power of two in [8, 65536]"));
    req.group = *o.group;
  }
  if (o.exact && o.force_requantize)
    return rep.Fail(
        absl::InvalidArgumentError("--exact and --force-requantize contradict each other"));
  if ((o.exact || o.force_requantize || o.keep_tolerance) && o.base.empty())
    return rep.Fail(
        absl::InvalidArgumentError("--exact, --force-requantize and --keep-tolerance need --base"));
  req.keep = o.exact              ? KeepPolicy::kExact
             : o.force_requantize ? KeepPolicy::kNever
                                  : KeepPolicy::kTolerance;
  if (o.keep_tolerance) req.keep_tolerance = *o.keep_tolerance;
  req.kv_window = o.kv_window.value_or(0);
  rep.Configure(&req);

  if (o.weights.empty() == o.checkpoint.empty())
    return rep.Fail(absl::InvalidArgumentError(
        "give the float weights: --weights W.safetensors or --checkpoint CKPT.pkl"));
  if (!o.lora_adapter.empty() && o.checkpoint.empty())
    return rep.Fail(absl::InvalidArgumentError(
        "--lora merges into a --checkpoint; for a .cact use `cact-quant lora`"));
  if (o.scale && o.lora_adapter.empty())
    return rep.Fail(absl::InvalidArgumentError("--scale needs --lora"));
  ReserveForWeightsIn(o.checkpoint.empty() ? o.weights : o.checkpoint);
  absl::StatusOr<Safetensors> weights;
  std::optional<CheckpointBuild> ckpt;
  if (!o.checkpoint.empty()) {
    absl::StatusOr<CheckpointBuild> c =
        LoadCheckpointForBuild(o.checkpoint, o.lora_adapter, o.scale);
    if (!c.ok()) return rep.Fail(c.status());
    ckpt.emplace(std::move(*c));
    if (req.scheme) {
      if (absl::Status st = CheckSchemeAgainstQat(ckpt->adapter_qat, *req.scheme, SchemeSource(o));
          !st.ok())
        return rep.Fail(st);
    }
    req.weights = &ckpt->canonical.weights;
    req.weights_path = o.checkpoint;
  } else {
    weights = ReadSafetensors(o.weights);
    if (!weights.ok())
      return rep.Fail(WithCactHint(weights.status(),
                                   "`cact-quant dequant` writes its float weights; --base "
                                   "takes it as the base"));
    req.weights = &*weights;
    req.weights_path = o.weights;
  }
  std::optional<CactFile> base;
  if (!o.base.empty()) {
    absl::StatusOr<CactFile> f = OpenFiniteCact(o.base);
    if (!f.ok()) return rep.Fail(f.status());
    base.emplace(std::move(*f));
    if (absl::Status s = CheckKvWindow(o, base->geometry().max_seq_len); !s.ok())
      return rep.Fail(s);
    if (ckpt && o.tokenizer.empty()) {
      // `needle build` takes only the tokenizer from the published archive: every tensor is
      // quantized afresh, so the base's bytes and widths play no part.
      absl::StatusOr<TokenizerBlob> t = ParseTokenizerBlob(base->tokenizer_blob(), o.base);
      if (!t.ok()) return rep.Fail(t.status());
      req.tokenizer = std::move(*t);
      req.tokenizer_source = o.base + " (its tokenizer)";
    } else if (!ckpt) {
      req.base = &*base;
    }
  }
  if (!o.tokenizer.empty()) {
    absl::StatusOr<TokenizerBlob> t = ReadSentencePieceModel(o.tokenizer);
    if (!t.ok()) return rep.Fail(WithCactHint(t.status(), "use --base to take its tokenizer"));
    req.tokenizer = std::move(*t);
    req.tokenizer_source = o.tokenizer;
  }
  if (!o.config.empty()) {
    absl::StatusOr<std::string> c = ReadText(o.config);
    if (!c.ok()) return rep.Fail(c.status());
    req.config_json = *c;
  }

  RebuildReport report = rep.StartRebuild("build", &timer);
  if (ckpt) report.notes.insert(report.notes.begin(), ckpt->notes.begin(), ckpt->notes.end());
  const absl::StatusOr<CactContents> contents = BuildCact(req, &report, rep.Progress());
  if (req.scheme) report.scheme_source = SchemeSource(o);
  return rep.Complete(contents, &report, &timer);
}

}  // namespace cact::quant_tool
