// What a rebuild (build / requant / lora / synth) did to every tensor, and the summary
// cact-quant prints: one line per tensor like llama-quantize, then sizes, bits per weight
// (as cact-inspect accounts them), kept / requantized counts and time; or JSON.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/cact/accounting.h"
#include "nlohmann/json.hpp"
#include "quant/cq/reencode.h"

namespace cact {

enum class TensorAction : uint8_t {
  kQuantized,    // CQ codes computed from the input float values
  kKept,         // the base file's bytes kept: the input values equal its dequantization
  kEncoded,      // FP16 written from the input float values
  kCopied,       // bytes copied unchanged from the input .cact (same width / untouched)
  kRequantized,  // CQ codes recomputed from dequantized values (a new width)
  kReencoded,    // an edit of the base's CQ bytes: unchanged groups kept, changed ones refitted
};
// "quantized", "kept", "fp16", "copied", "requantized", "re-encoded"
const char* ActionName(TensorAction a);

// A CQ tensor re-encoded against the base's bytes (quant/cq/reencode.h): how many of its
// groups kept their bytes, were refitted, or were quantized as new values, and how far the
// edit reached the file. W = the base dequantized, E = the edited values, R = the result.
struct GroupFigures {
  uint64_t kept = 0, reencoded = 0, quantized = 0;
  double edit_rel = 0;  // ||E - W|| / ||W||
  double survived = 0;  // ||R - W|| / ||E - W||: ~1 when the edit reached the file, ~0 lost
  double error = 0;     // ||R - E|| / ||E - W||: what the format could not represent
};
GroupFigures GroupFiguresOf(const ReencodeResult& r);

// LoRA figures of one merged tensor. W = base dequantized, dW = scale * B @ A, R = the
// merged tensor as written (re-encoded: re-encoding W alone gives back W's bytes).
struct LoraFigures {
  uint32_t layer = 0, rank = 0;
  double update_rel = 0;  // ||dW|| / ||W||
  double survived = 0;    // ||R - W|| / ||dW||: ~0 when the update vanished
  double aligned = 0;     // <R - W, dW> / ||dW||^2: share of dW kept along its direction
};

struct TensorOutcome {
  std::string name;
  std::vector<uint32_t> shape;
  std::string source;  // "f32" / "f16" / "bf16" (safetensors), "CQ4 g128" / "FP16" (a .cact)
  std::string target;  // "CQ2 g128", "FP16", "RAW"
  TensorAction action = TensorAction::kQuantized;
  std::string reason;   // why this action, e.g. "= base (max |d| 3e-08 <= 4e-06 x max)"
  uint64_t bytes = 0;   // blob bytes written
  double rel_mse = -1;  // quantized tensors: ||W - Q(W)||^2 / ||W||^2
  std::optional<GroupFigures> groups;
  std::optional<LoraFigures> lora;
};

struct RebuildReport {
  std::string command;  // "build", "requant", "lora", "synth"
  std::string output;
  bool dry_run = false;
  std::string scheme, scheme_source;  // e.g. "embedding=4,mhc=4,default=2", "--scheme"
  uint32_t group = 128;
  std::string geometry_source, tokenizer_source;
  std::vector<TensorOutcome> tensors;
  Accounting accounting;       // of the output records (file_bytes = uncompressed size)
  uint64_t file_bytes = 0;     // the .cact bytes
  uint64_t written_bytes = 0;  // bytes on disk (compressed for .zst; 0 for --dry-run)
  bool zstd = false;
  double seconds = 0;  // wall time of the whole command
  double read_seconds = 0, work_seconds = 0,
         write_seconds = 0;     // its phases (read = inputs read or generated)
  double work_cpu_seconds = 0;  // CPU time of the quantize phase, all threads
  std::vector<std::string> notes;

  size_t Count(TensorAction a) const;
};

// "layer00.q_proj [512,512] f32 -> CQ2 g128  rel-mse 0.0231  131072 B" (no index prefix).
std::string ProgressLine(const TensorOutcome& t);
// The human summary printed after the per-tensor lines.
std::string SummaryText(const RebuildReport& r);
// Stable keys; see docs/cact-quant.md.
nlohmann::ordered_json ReportJson(const RebuildReport& r);

}  // namespace cact
