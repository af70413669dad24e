// The way back to .cact: given the source file and the (possibly edited) float value of
// every tensor, decide per tensor whether the source's packed bytes can be reused (the
// value equals their decoding bit for bit) or must be quantized again, and build the new
// file's contents. Shared by the TorchScript and the safetensors import.
#pragma once
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/writer.h"
#include "formats/safetensors.h"
#include "quant/scheme.h"

namespace cact::torchscript {

struct ReturnOptions {
  std::optional<Scheme> scheme;   // new widths for CQ records; nullopt = keep each width
  bool force_requantize = false;  // quantize every CQ record and re-round every FP16 one
};

enum class ReturnAction {
  kKept,         // source bytes reused
  kRequantized,  // CQ record quantized from the new values (new throughout, width, forced)
  kReencoded,    // edited CQ record: unchanged groups kept, changed ones refitted (reencode.h)
  kRounded,      // FP16 record rounded from the new values
  kStoredFloat,  // FP32 record stored from the new values
};
// "kept", "requantized", "re-encoded", "rounded", "stored"
const char* ReturnActionName(ReturnAction a);

struct ReturnDecision {
  std::string name;
  ReturnAction action = ReturnAction::kKept;
  std::string before, after;  // type labels, e.g. "CQ2 g128", "FP16"
  std::string reason;         // "edited", "width 2 -> 4", "forced"; empty when kept
  double edit_rel = 0;        // ||new - source|| / ||source|| (new = the given floats)
  double survived = 1;        // ||decoded(result) - source|| / ||new - source|| (1 when no edit)
  uint64_t groups_kept = 0, groups_reencoded = 0, groups_quantized = 0;  // of re-encoded CQ
};

struct ReturnResult {
  CactContents contents;
  std::vector<ReturnDecision> decisions;  // one per non-RAW record, directory order
  std::vector<std::string> warnings;
  size_t kept() const;
  size_t changed() const { return decisions.size() - kept(); }
};

// `values` maps canonical names to floats in the record's logical shape. Every non-RAW
// record must be present with the same shape (else a clear error naming `input`).
absl::StatusOr<ReturnResult> PlanReturn(const CactFile& source,
                                        const std::map<std::string, const FloatTensor*>& values,
                                        const ReturnOptions& options, const std::string& input);

// One line per tensor plus a summary ("kept 95, requantized 1, ...").
std::string FormatReturnReport(const ReturnResult& r, bool verbose);

}  // namespace cact::torchscript
