#include "quant/requant.h"

#include "absl/strings/str_format.h"
#include "lib/status.h"
#include "quant/tensor_values.h"

namespace cact {

CqShape RetypeAsCq(const TensorEntry& t, uint32_t bits, uint32_t group, TensorOutcome* o,
                   TensorBlob* blob) {
  if (t.is_cq()) group = t.record.group;
  const CqShape shape{uint32_t(t.rows()), uint32_t(t.cols()), group, bits};
  blob->record.dtype = DType::kCQ;
  blob->record.group = group;
  blob->record.bits = bits;
  blob->record.nbytes = shape.blob_bytes();
  o->target = TypeLabel(blob->record);
  return shape;
}

absl::Status RequantizeTensor(const CactFile& in, const TensorEntry& t, uint32_t bits,
                              uint32_t group, CqRotation rotation, bool dry_run,
                              TensorOutcome* o, TensorBlob* blob) {
  const CqShape shape = RetypeAsCq(t, bits, group, o, blob);
  o->action = TensorAction::kRequantized;
  o->reason = absl::StrFormat("%s -> %s from the dequantized values", o->source, o->target);
  if (dry_run) return absl::OkStatus();
  CACT_ASSIGN_OR_RETURN(std::vector<float> values, TensorValues(in, t));
  const std::vector<float> cb = in.CodebookFor(bits, shape.group);
  CqMatrix m = QuantizeMatrix(values.data(), shape, cb, rotation);
  o->rel_mse = m.rel_mse();
  blob->bytes = PackBlob(m);
  return absl::OkStatus();
}

absl::StatusOr<CactContents> RequantCact(const RequantRequest& req, RebuildReport* report,
                                         const TensorCallback& on_tensor) {
  const CactFile& in = *req.input;
  std::vector<std::string> matrices;
  for (const TensorEntry& t : in.tensors())
    if (t.kind == TensorKind::kMatrix) matrices.push_back(t.name);
  CACT_RETURN_IF_ERROR(CheckRulesMatch(req.scheme, matrices));
  CactContents out;
  out.geometry = in.geometry();
  if (req.kv_window) out.geometry.kv_window = req.kv_window;
  // The stored codebook is kept verbatim so copied records keep their meaning, and new
  // codes are chosen against exactly the values a reader will use (CodebookFor).
  out.codebook.assign(in.codebook().begin(), in.codebook().end());
  report->scheme = req.scheme.ToString();
  report->scheme_source = "--scheme";
  report->group = in.codebook_group();
  report->geometry_source = in.path();
  report->tokenizer_source = in.path() + " (bytes copied)";
  report->dry_run = req.dry_run;

  const auto& tensors = in.tensors();
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorEntry& t = tensors[i];
    auto [o, blob] = CarryTensor(t);
    const bool matrix = t.kind == TensorKind::kMatrix;
    const uint32_t bits = matrix ? req.scheme.BitsFor(t.name) : 0;
    if (!matrix || (t.is_cq() && t.record.bits == bits)) {
      CopyBlobBytes(in, t, &blob);
      o.action = TensorAction::kCopied;
      o.reason = matrix ? "width unchanged" : "not a CQ matrix";
    } else {
      CACT_RETURN_IF_ERROR(RequantizeTensor(in, t, bits, report->group ? report->group : 128,
                                            req.rotation, req.dry_run, &o, &blob));
    }
    o.bytes = blob.record.nbytes;
    report->tensors.push_back(o);
    out.tensors.push_back(std::move(blob));
    if (on_tensor) on_tensor(i + 1, tensors.size(), report->tensors.back());
  }
  if (report->Count(TensorAction::kRequantized))
    report->notes.push_back(
        "requantized tensors start from dequantized values, not the original float weights: "
        "their error adds to the first quantization's");
  return out;
}

}  // namespace cact
