#include "engine/forward_paths.h"

// The fast path (engine/fast_forward.h, kernels helper) is wired in when it is present, so
// this file builds at every commit whether or not it has landed.
#if __has_include("engine/fast_forward.h")
#include "engine/fast_forward.h"
#include "engine/fast_path_limits.h"
#define CACT_HAVE_FAST_FORWARD 1
#else
#define CACT_HAVE_FAST_FORWARD 0
#endif

namespace cact {

bool HasFastForward() { return CACT_HAVE_FAST_FORWARD; }

std::vector<std::string> AvailableForwardPaths() {
  std::vector<std::string> paths = {"ref"};
  if (HasFastForward()) paths.push_back("fast");
  return paths;
}

bool IsReferencePath(std::string_view path) {
  return path == "ref" || path == "reference" || (path == "auto" && !HasFastForward());
}

absl::StatusOr<std::unique_ptr<Forward>> MakeForwardPath(const Model& model, std::string_view path,
                                                         const ForwardOptions& options) {
  if (IsReferencePath(path)) return MakeReferenceForward(model, options);
  if (path == "auto") path = "fast";
#if CACT_HAVE_FAST_FORWARD
  if (path == "fast") {
    if (absl::Status st = CheckFastPathSupports(model.geometry(), options.attn); !st.ok()) return st;
    return MakeFastForward(model, options);
  }
#else
  if (path == "fast")
    return absl::UnimplementedError("the fast path is not built yet; use the FP32 reference path");
#endif
  return absl::InvalidArgumentError("unknown forward path '" + std::string(path) +
                                    "' (expected fast, ref or auto)");
}

}  // namespace cact
