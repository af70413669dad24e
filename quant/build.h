// cact-quant build: float weights (safetensors, canonical names, [out, in]) + a scheme +
// a tokenizer -> .cact contents, optionally against a base file whose bytes are kept for
// every tensor the weights did not change (selective.h).
#pragma once
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "formats/cact/cact_file.h"
#include "formats/needle/tensor_table.h"
#include "formats/cact/writer.h"
#include "formats/safetensors.h"
#include "formats/tokenizer_blob.h"
#include "quant/cq/cq.h"
#include "quant/rebuild_report.h"
#include "quant/scheme.h"
#include "quant/selective.h"

namespace cact {

// Called after each tensor, in directory order: (1-based index, total, outcome).
using TensorCallback = std::function<void(size_t, size_t, const TensorOutcome&)>;

struct BuildRequest {
  const Safetensors* weights = nullptr;
  std::string weights_path = "weights";  // for messages
  std::string config_json;         // official config JSON (--config); empty = metadata/base/shapes
  const CactFile* base = nullptr;  // --base: geometry, tokenizer, widths, bytes to keep
  std::optional<TokenizerBlob> tokenizer;  // --tokenizer (wins over the base's)
  std::string tokenizer_source;
  std::optional<Scheme>
      scheme;  // --scheme; else the base's widths, the metadata bits_map, the default
  std::optional<uint32_t> group;             // --group; else the base's, the metadata's, 128
  uint32_t kv_window = 0;                    // --kv-window (0 = keep)
  KeepPolicy keep = KeepPolicy::kTolerance;  // with a base: --exact / --force-requantize
  double keep_tolerance = kKeepTolerance;
  CqRotation rotation = CqRotation::kFwht;
  bool dry_run = false;  // plan and sizes only: no quantization (blobs left empty)
};

absl::StatusOr<CactContents> BuildCact(const BuildRequest& request, RebuildReport* report,
                                       const TensorCallback& on_tensor = nullptr);

// Sizes and accounting of `contents` into `report`; unless report->dry_run, serializes
// (validated by re-parsing) and writes `path` atomically (zstd when it ends in ".zst").
absl::Status FinishRebuild(const CactContents& contents, const std::string& path, int zstd_level,
                           RebuildReport* report);

// The record BuildCact writes at `spec`'s position (offset unset): CQ `bits`/`group` for a
// matrix, FP16 for a vector, RAW of `tokenizer_bytes` for the tokenizer. Sizes of a plan
// (scheme_presets.h) come from here, so they are the sizes a build writes.
TensorRecord PlannedRecord(const TensorSpec& spec, uint32_t bits, uint32_t group,
                           uint64_t tokenizer_bytes);

// Helpers shared by build / requant / lora.
// A tensor of an input .cact carried into a rebuild: the outcome has its name, shape and
// type (as source and target); the blob its name and record, and no bytes yet.
struct CarriedTensor {
  TensorOutcome outcome;
  TensorBlob blob;
};
CarriedTensor CarryTensor(const TensorEntry& t);
// blob->bytes = the bytes `t` has in `file`.
void CopyBlobBytes(const CactFile& file, const TensorEntry& t, TensorBlob* blob);
// True when the file's stored codebook is exactly HeaderCodebook(group).
bool HasStandardCodebook(const CactFile& f, uint32_t group);

}  // namespace cact
