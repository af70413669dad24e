// Choosing a forward path by name, for tools and tests: "ref" (alias "reference") is the
// FP32 reference; "fast" is the int8 path once it is built (engine/fast_forward.h);
// "auto" picks fast when available, else ref.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/forward.h"

namespace cact {

std::vector<std::string> AvailableForwardPaths();
bool HasFastForward();
// True when `path` (as MakeForwardPath takes it) names the FP32 reference: "ref",
// "reference", or "auto" without the fast path.
bool IsReferencePath(std::string_view path);
absl::StatusOr<std::unique_ptr<Forward>> MakeForwardPath(const Model& model, std::string_view path,
                                                         const ForwardOptions& options);

}  // namespace cact
