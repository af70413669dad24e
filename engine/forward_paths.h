// Choosing a forward path by name, for tools and tests: "ref" (alias "reference") is the
// FP32 reference; "fast" is the int8 path (engine/fast_forward.h) with its default
// numerics, "fast-int8" the same with plain int8 activations and codebooks (the official
// engine's numerics; FastForwardOptions); "auto" is fast.
#pragma once
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/forward.h"

namespace cact {

std::vector<std::string> AvailableForwardPaths();
// True when `path` (as MakeForwardPath takes it) names the FP32 reference: "ref" or
// "reference".
bool IsReferencePath(std::string_view path);
absl::StatusOr<std::unique_ptr<Forward>> MakeForwardPath(const Model& model, std::string_view path,
                                                         const ForwardOptions& options);

}  // namespace cact
