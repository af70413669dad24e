#include "engine/forward_paths.h"

#include <algorithm>

#include "engine/fast_forward.h"
#include "engine/fast_path_limits.h"
#include "lib/cpu_features.h"

namespace cact {

std::vector<std::string> AvailableForwardPaths() { return {"ref", "fast", "fast-int8"}; }

bool IsReferencePath(std::string_view path) { return path == "ref" || path == "reference"; }

absl::StatusOr<std::unique_ptr<Forward>> MakeForwardPath(const Model& model, std::string_view path,
                                                         const ForwardOptions& options) {
  if (IsReferencePath(path)) return MakeReferenceForward(model, options);
  if (path == "auto") path = "fast";
  if (path == "fast" || path == "fast-int8") {
    if (absl::Status st = CheckFastPathSupports(model.geometry(), options.attn); !st.ok())
      return st;
    FastForwardOptions fast;
    if (path == "fast-int8") fast.two_level_activations = fast.codebook_residual = false;
    return MakeFastForward(model, options, fast);
  }
  return absl::InvalidArgumentError("unknown forward path '" + std::string(path) +
                                    "' (expected fast, fast-int8, ref or auto)");
}

int AutoThreads(std::string_view path, uint32_t kv_heads) {
  if (IsReferencePath(path)) return 1;
  return std::max(1, std::min(AvailableCpus(), int(std::min<uint32_t>(kv_heads, 256))));
}

}  // namespace cact
