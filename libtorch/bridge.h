// What `cact-torch` does, as library calls (the CLI only parses arguments and prints).
#pragma once
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "libtorch/return_plan.h"
#include "formats/cact/cact_file.h"

namespace cact::torchscript {

// `--format safetensors`: FP32 weights under canonical names in logical [out, in] shapes,
// plus config.json (the same JSON the TorchScript module carries: geometry, scheme, source
// SHA-256, per-tensor dtype/width/group). `out` ending in ".safetensors" writes that file
// and "config.json" beside it; any other `out` is a directory that receives
// "model.safetensors" and "config.json". Returns the paths written.
absl::StatusOr<std::vector<std::string>> ExportSafetensors(const CactFile& file,
                                                           const std::string& out);

struct ImportRequest {
  std::string input;                // MODEL.pt, a .safetensors file or an export directory
  std::optional<std::string> base;  // the source .cact, required for safetensors input
  std::string output;               // .cact (or .cact.zst)
  ReturnOptions options;
};

enum class ImportFormat { kTorchScript, kSafetensors };
// Sniffs the input: a zip archive is TorchScript, a directory or anything else safetensors.
ImportFormat DetectImportFormat(const std::string& input);

// Reads the input, plans the return against the source (carried bytes for TorchScript,
// --base for safetensors) and writes the output atomically. Nothing is written on error.
absl::StatusOr<ReturnResult> ImportToCact(const ImportRequest& request);

}  // namespace cact::torchscript
