#include "libtorch/return_plan.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/status.h"
#include "quant/cact_diff.h"
#include "quant/cq/cq.h"
#include "quant/cq/fp16.h"
#include "quant/cq/reencode.h"
#include "quant/selective.h"
#include "quant/tensor_values.h"

namespace cact::torchscript {
namespace {

std::string ShapeText(const std::vector<uint32_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

bool BitwiseEqual(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

double DiffNorm(const std::vector<float>& a, const std::vector<float>& b) {
  double s = 0;
  for (size_t i = 0; i < a.size(); ++i) {
    double d = double(a[i]) - double(b[i]);
    s += d * d;
  }
  return std::sqrt(s);
}

double Norm(const std::vector<float>& a) {
  double s = 0;
  for (float v : a) s += double(v) * double(v);
  return std::sqrt(s);
}

std::vector<uint8_t> HalfBytes(const std::vector<float>& v, std::vector<float>* decoded) {
  std::vector<uint8_t> out(v.size() * 2);
  decoded->resize(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    uint16_t h = FloatToHalf(v[i]);
    out[2 * i] = uint8_t(h & 0xFF);
    out[2 * i + 1] = uint8_t(h >> 8);
    (*decoded)[i] = HalfToFloat(h);
  }
  return out;
}

std::vector<uint8_t> FloatBytes(const std::vector<float>& v) {
  std::vector<uint8_t> out(v.size() * 4);
  std::memcpy(out.data(), v.data(), out.size());
  return out;
}

}  // namespace

const char* ReturnActionName(ReturnAction a) {
  switch (a) {
    case ReturnAction::kKept:
      return "kept";
    case ReturnAction::kRequantized:
      return "requantized";
    case ReturnAction::kReencoded:
      return "re-encoded";
    case ReturnAction::kRounded:
      return "rounded";
    case ReturnAction::kStoredFloat:
      return "stored";
  }
  return "?";
}

size_t ReturnResult::kept() const {
  size_t n = 0;
  for (const ReturnDecision& d : decisions) n += d.action == ReturnAction::kKept;
  return n;
}

absl::StatusOr<ReturnResult> PlanReturn(const CactFile& source,
                                        const std::map<std::string, const FloatTensor*>& values,
                                        const ReturnOptions& options, const std::string& input) {
  ReturnResult result;
  result.contents.geometry = source.geometry();
  result.contents.codebook.assign(source.codebook().begin(), source.codebook().end());

  for (const TensorEntry& t : source.tensors()) {
    TensorBlob out;
    out.name = t.name;
    out.record = t.record;
    std::span<const uint8_t> original = source.blob(t);
    if (t.record.dtype == DType::kRAW) {  // the tokenizer is not a parameter
      out.bytes.assign(original.begin(), original.end());
      result.contents.tensors.push_back(std::move(out));
      continue;
    }
    auto it = values.find(t.name);
    if (it == values.end() || it->second == nullptr) {
      return FileError(input, "parameter '" + t.name +
                                  "' is missing (every tensor of the source must be present)");
    }
    const FloatTensor& edited = *it->second;
    if (edited.shape != t.shape()) {
      return FileError(input, "parameter '" + t.name + "' has shape " + ShapeText(edited.shape) +
                                  ", the source has " + ShapeText(t.shape()) +
                                  " (shapes cannot change on the way back)");
    }
    if (edited.data.size() != t.record.NumElements()) {
      return FileError(input, "parameter '" + t.name + "' has " +
                                  std::to_string(edited.data.size()) + " values for shape " +
                                  ShapeText(t.shape()));
    }
    CACT_ASSIGN_OR_RETURN(std::vector<float> before, TensorValues(source, t));
    for (size_t i = 0; i < edited.data.size(); ++i) {
      if (!std::isfinite(edited.data[i]) &&
          std::memcmp(&edited.data[i], &before[i], sizeof(float)) != 0) {
        return FileError(
            input,
            absl::StrFormat("parameter '%s' has a non-finite value at element %u", t.name, i));
      }
    }

    ReturnDecision d;
    d.name = t.name;
    d.before = TypeLabel(t.record);
    const bool unedited = BitwiseEqual(edited.data, before);
    const double before_norm = Norm(before);
    const double edit = unedited ? 0.0 : DiffNorm(edited.data, before);
    d.edit_rel = before_norm > 0 ? edit / before_norm : edit;

    uint32_t target_bits = t.record.bits;
    if (t.record.dtype == DType::kCQ && options.scheme)
      target_bits = options.scheme->BitsFor(t.name);
    const bool width_changed = t.record.dtype == DType::kCQ && target_bits != t.record.bits;

    if (unedited && !width_changed && !options.force_requantize) {
      d.action = ReturnAction::kKept;
      out.bytes.assign(original.begin(), original.end());
    } else {
      d.reason = width_changed ? absl::StrFormat("width %s -> %s", WidthName(t.record.bits),
                                                 WidthName(target_bits))
                 : !unedited   ? "edited"
                               : "forced";
      std::vector<float> decoded;
      switch (t.record.dtype) {
        case DType::kCQ: {
          out.record.bits = target_bits;
          CqShape shape = CqShapeOf(t);
          shape.bits = target_bits;
          std::vector<float> cb = source.CodebookFor(target_bits, shape.group);
          if (!width_changed && !options.force_requantize) {
            // Groups the edit left alone keep their bytes, edited ones are refitted, and
            // groups holding new values (float weights, not an edit) are quantized as the
            // exporter would: a file's own float weights give back the exporter's file.
            ReencodeOptions ro;
            ro.keep_tolerance = kKeepTolerance;
            ro.quantize_far_groups = true;
            ReencodeResult r =
                ReencodeMatrix(original, shape, cb, edited.data.data(), before.data(), ro);
            out.bytes = std::move(r.blob);
            decoded = std::move(r.values);
            d.groups_kept = r.kept;
            d.groups_reencoded = r.reencoded;
            d.groups_quantized = r.quantized;
            d.action = r.kept + r.reencoded ? ReturnAction::kReencoded : ReturnAction::kRequantized;
            break;
          }
          out.bytes = PackBlob(QuantizeMatrix(edited.data.data(), shape, cb));
          decoded.resize(edited.data.size());
          DequantizeBlob(out.bytes, shape, cb, decoded.data());
          d.action = ReturnAction::kRequantized;
          break;
        }
        case DType::kFP16:
          out.bytes = HalfBytes(edited.data, &decoded);
          d.action = ReturnAction::kRounded;
          break;
        case DType::kFP32:
          out.bytes = FloatBytes(edited.data);
          decoded = edited.data;
          d.action = ReturnAction::kStoredFloat;
          break;
        case DType::kRAW:
          break;
      }
      if (edit > 0) d.survived = DiffNorm(decoded, before) / edit;
    }
    out.record.nbytes = out.bytes.size();
    d.after = TypeLabel(out.record);
    result.decisions.push_back(std::move(d));
    result.contents.tensors.push_back(std::move(out));
  }
  // Names the caller gave that the source does not have are edits that would be lost.
  for (const auto& [name, tensor] : values) {
    if (!source.Find(name)) {
      return FileError(input, "parameter '" + name + "' is not a tensor of the source file (" +
                                  source.path() + "); new tensors cannot be added");
    }
  }
  return result;
}

std::string FormatReturnReport(const ReturnResult& r, bool verbose) {
  std::string s;
  std::map<ReturnAction, size_t> count;
  for (const ReturnDecision& d : r.decisions) {
    ++count[d.action];
    if (d.action == ReturnAction::kKept && !verbose) continue;
    if (d.action == ReturnAction::kKept) {
      absl::StrAppendFormat(&s, "  kept         %-24s %s\n", d.name, d.before);
    } else {
      const std::string groups =
          d.action == ReturnAction::kReencoded
              ? absl::StrFormat("  groups %d kept / %d refit / %d quantized", d.groups_kept,
                                d.groups_reencoded, d.groups_quantized)
              : "";
      absl::StrAppendFormat(&s, "  %-12s %-24s %s -> %s (%s)  |edit|/|w| %.3g  survived %.3g%s\n",
                            ReturnActionName(d.action), d.name, d.before, d.after, d.reason,
                            d.edit_rel, d.survived, groups);
    }
  }
  for (const std::string& w : r.warnings) absl::StrAppend(&s, "warning: ", w, "\n");
  absl::StrAppendFormat(&s,
                        "kept %u, re-encoded %u, requantized %u, rounded %u, stored %u (of %u "
                        "tensors)\n",
                        count[ReturnAction::kKept], count[ReturnAction::kReencoded],
                        count[ReturnAction::kRequantized],
                        count[ReturnAction::kRounded], count[ReturnAction::kStoredFloat],
                        r.decisions.size());
  return s;
}

}  // namespace cact::torchscript
