#include "quant/rebuild_report.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace cact {
namespace {

std::string ShapeText(const std::vector<uint32_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ","), "]");
}

std::string Bytes(uint64_t b) {
  if (b >= (1u << 20)) return absl::StrFormat("%d B (%.2f MiB)", b, double(b) / (1 << 20));
  return absl::StrFormat("%d B", b);
}

}  // namespace

const char* ActionName(TensorAction a) {
  switch (a) {
    case TensorAction::kQuantized:
      return "quantized";
    case TensorAction::kKept:
      return "kept";
    case TensorAction::kEncoded:
      return "fp16";
    case TensorAction::kCopied:
      return "copied";
    case TensorAction::kRequantized:
      return "requantized";
    case TensorAction::kReencoded:
      return "re-encoded";
  }
  return "?";
}

GroupFigures GroupFiguresOf(const ReencodeResult& r) {
  GroupFigures f;
  f.kept = r.kept;
  f.reencoded = r.reencoded;
  f.quantized = r.quantized;
  f.edit_rel = r.base_norm > 0 ? r.edit_norm / r.base_norm : 0.0;
  f.survived = r.survived();
  f.error = r.edit_norm > 0 ? r.error_norm / r.edit_norm : 0.0;
  return f;
}

size_t RebuildReport::Count(TensorAction a) const {
  size_t n = 0;
  for (const TensorOutcome& t : tensors) n += t.action == a;
  return n;
}

std::string ProgressLine(const TensorOutcome& t) {
  std::string line =
      absl::StrFormat("%-24s %-13s %-8s -> %-9s", t.name, ShapeText(t.shape), t.source, t.target);
  switch (t.action) {
    case TensorAction::kQuantized:
    case TensorAction::kRequantized:
      line += absl::StrFormat("  rel-mse %.4f", t.rel_mse);
      if (t.action == TensorAction::kRequantized) line += "  requantized";
      break;
    case TensorAction::kKept:
      line += "  kept (base bytes)";
      break;
    case TensorAction::kCopied:
      line += "  copied";
      break;
    case TensorAction::kReencoded:
      line += absl::StrFormat("  rel-mse %.4f  re-encoded", t.rel_mse);
      break;
    case TensorAction::kEncoded:
      break;
  }
  if (t.groups) {
    line += absl::StrFormat("  groups %d kept / %d refit", t.groups->kept, t.groups->reencoded);
    if (t.groups->quantized) line += absl::StrFormat(" / %d quantized", t.groups->quantized);
    if (!t.lora)  // a merge reports its update below
      line += absl::StrFormat("  |edit|/|W| %.2e  survived %.2f", t.groups->edit_rel,
                              t.groups->survived);
  }
  if (t.lora)
    line += absl::StrFormat("  |dW|/|W| %.2e  survived %.2f", t.lora->update_rel, t.lora->survived);
  return line + absl::StrFormat("  %d B", t.bytes);
}

std::string SummaryText(const RebuildReport& r) {
  const Accounting& a = r.accounting;
  std::string s;
  s += absl::StrFormat("%s%s: %s\n", r.command, r.dry_run ? " (dry run, nothing written)" : "",
                       r.output);
  if (!r.scheme.empty())
    s += absl::StrFormat("  scheme          %s (%s), group %d\n", r.scheme, r.scheme_source,
                         r.group);
  if (!r.geometry_source.empty())
    s += absl::StrFormat("  geometry        from %s\n", r.geometry_source);
  if (!r.tokenizer_source.empty())
    s += absl::StrFormat("  tokenizer       from %s\n", r.tokenizer_source);
  s += absl::StrFormat(
      "  tensors         %d: %d quantized, %d requantized, %d re-encoded, %d kept (base bytes), "
      "%d copied, %d fp16\n",
      r.tensors.size(), r.Count(TensorAction::kQuantized), r.Count(TensorAction::kRequantized),
      r.Count(TensorAction::kReencoded), r.Count(TensorAction::kKept),
      r.Count(TensorAction::kCopied), r.Count(TensorAction::kEncoded));
  uint64_t kept = 0, refit = 0, quantized = 0;
  for (const TensorOutcome& t : r.tensors) {
    if (!t.groups) continue;
    kept += t.groups->kept;
    refit += t.groups->reencoded;
    quantized += t.groups->quantized;
  }
  if (kept + refit + quantized)
    s += absl::StrFormat(
        "  groups          of the re-encoded tensors: %d kept, %d refitted, %d quantized\n", kept,
        refit, quantized);
  // What a rebuild touched, by name, whenever something was kept or copied.
  if (r.Count(TensorAction::kKept) + r.Count(TensorAction::kCopied) > 1) {
    std::vector<std::string> touched;
    for (const TensorOutcome& t : r.tensors)
      if (t.action != TensorAction::kKept && t.action != TensorAction::kCopied)
        touched.push_back(t.name);
    if (touched.size() > 12) {
      const size_t more = touched.size() - 12;
      touched.resize(12);
      touched.push_back(absl::StrFormat("... and %d more", more));
    }
    s += absl::StrFormat("  changed         %s\n", touched.empty()
                                                       ? "nothing (every tensor kept or copied)"
                                                       : absl::StrJoin(touched, ", "));
  }
  s += absl::StrFormat("  parameters      %d (CQ %d, code-weighted width %.6f bits)\n", a.params,
                       a.cq_params, a.code_weighted_bits);
  s += absl::StrFormat("  payload         %s, %.6f bpw (incl. %d B of FP16 group norms)\n",
                       Bytes(a.payload_bytes), a.payload_bpw, a.norm_bytes);
  s += absl::StrFormat("  file            %s, %.6f bpw\n", Bytes(r.file_bytes), a.file_bpw);
  if (r.zstd && !r.dry_run)
    s += absl::StrFormat("  zstd            %s on disk (ratio %.3f)\n", Bytes(r.written_bytes),
                         r.written_bytes ? double(r.file_bytes) / double(r.written_bytes) : 0.0);
  for (const std::string& n : r.notes) s += "  note            " + n + "\n";
  s += absl::StrFormat(
      "  time            %.3f s (inputs %.3f s, quantize %.3f s [cpu %.3f s], write %.3f s)\n",
      r.seconds, r.read_seconds, r.work_seconds, r.work_cpu_seconds, r.write_seconds);
  return s;
}

nlohmann::ordered_json ReportJson(const RebuildReport& r) {
  nlohmann::ordered_json j;
  j["command"] = r.command;
  j["output"] = r.output;
  j["dry_run"] = r.dry_run;
  j["scheme"] = r.scheme;
  j["scheme_source"] = r.scheme_source;
  j["group"] = r.group;
  j["geometry_source"] = r.geometry_source;
  j["tokenizer_source"] = r.tokenizer_source;
  nlohmann::ordered_json counts;
  for (TensorAction a : {TensorAction::kQuantized, TensorAction::kRequantized,
                         TensorAction::kReencoded, TensorAction::kKept, TensorAction::kCopied,
                         TensorAction::kEncoded})
    counts[ActionName(a)] = r.Count(a);
  j["counts"] = counts;
  const Accounting& a = r.accounting;
  j["params"] = a.params;
  j["cq_params"] = a.cq_params;
  j["code_weighted_bits"] = a.code_weighted_bits;
  j["norm_bytes"] = a.norm_bytes;
  j["payload_bytes"] = a.payload_bytes;
  j["payload_bpw"] = a.payload_bpw;
  j["file_bytes"] = r.file_bytes;
  j["file_bpw"] = a.file_bpw;
  j["zstd"] = r.zstd;
  j["written_bytes"] = r.written_bytes;
  j["seconds"] = r.seconds;
  j["input_seconds"] = r.read_seconds;
  j["quantize_seconds"] = r.work_seconds;
  j["quantize_cpu_seconds"] = r.work_cpu_seconds;
  j["write_seconds"] = r.write_seconds;
  j["notes"] = r.notes;
  nlohmann::ordered_json tensors = nlohmann::ordered_json::array();
  for (const TensorOutcome& t : r.tensors) {
    nlohmann::ordered_json e;
    e["name"] = t.name;
    e["shape"] = t.shape;
    e["source"] = t.source;
    e["target"] = t.target;
    e["action"] = ActionName(t.action);
    e["reason"] = t.reason;
    e["bytes"] = t.bytes;
    if (t.rel_mse >= 0) e["rel_mse"] = t.rel_mse;
    if (t.groups) {
      e["groups"] = {{"kept", t.groups->kept},         {"reencoded", t.groups->reencoded},
                     {"quantized", t.groups->quantized}, {"edit_rel", t.groups->edit_rel},
                     {"survived", t.groups->survived}, {"error", t.groups->error}};
    }
    if (t.lora) {
      e["lora"] = {{"layer", t.lora->layer},
                   {"rank", t.lora->rank},
                   {"update_rel", t.lora->update_rel},
                   {"survived", t.lora->survived},
                   {"aligned", t.lora->aligned}};
    }
    tensors.push_back(e);
  }
  j["tensors"] = tensors;
  return j;
}

}  // namespace cact
