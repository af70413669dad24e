#include "engine/forward_paths.h"

#include "engine/fast_forward.h"
#include "engine/fast_path_limits.h"

namespace cact {

std::vector<std::string> AvailableForwardPaths() { return {"ref", "fast"}; }

bool IsReferencePath(std::string_view path) { return path == "ref" || path == "reference"; }

absl::StatusOr<std::unique_ptr<Forward>> MakeForwardPath(const Model& model, std::string_view path,
                                                         const ForwardOptions& options) {
  if (IsReferencePath(path)) return MakeReferenceForward(model, options);
  if (path == "auto") path = "fast";
  if (path == "fast") {
    if (absl::Status st = CheckFastPathSupports(model.geometry(), options.attn); !st.ok())
      return st;
    return MakeFastForward(model, options);
  }
  return absl::InvalidArgumentError("unknown forward path '" + std::string(path) +
                                    "' (expected fast, ref or auto)");
}

}  // namespace cact
