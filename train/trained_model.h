// A trained model's files: the FP32 weights as safetensors (canonical names, the metadata
// `cact-quant build` reads) and the .cact built from them by the quant library.
#pragma once
#include <string>

#include "absl/status/statusor.h"
#include "formats/safetensors.h"
#include "formats/tokenizer_blob.h"
#include "quant/rebuild_report.h"
#include "quant/scheme.h"

namespace cact::train {

// Adds the metadata of a buildable weights file: the official config JSON, bits_map, group,
// kv_window_header, plus `extra` entries (training command, seeds, ...).
void SetModelMetadata(const Geometry& g, const Scheme& scheme,
                      const std::map<std::string, std::string>& extra, Safetensors* weights);

// Quantizes `weights` with `scheme` into `cact_path` (atomic; .zst compresses) and returns
// the build report (sizes, per-tensor error).
absl::StatusOr<RebuildReport> BuildTrainedCact(const Safetensors& weights,
                                               const TokenizerBlob& tokenizer,
                                               const std::string& tokenizer_source,
                                               const Scheme& scheme, const std::string& cact_path);

}  // namespace cact::train
