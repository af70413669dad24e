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

// Decode is bound by memory bandwidth and per-token work repeated on every thread: past a
// few threads they mostly wait at the barriers.
inline constexpr int kMaxAutoThreads = 8;
// The thread count "0" (auto) means for `path`: the CPUs this process may run on, at most
// kMaxAutoThreads, for the fast paths; one for the FP32 reference (the slow oracle; its
// OpenMP loops degrade badly on a busy machine).
int AutoThreads(std::string_view path);
absl::StatusOr<std::unique_ptr<Forward>> MakeForwardPath(const Model& model, std::string_view path,
                                                         const ForwardOptions& options);

}  // namespace cact
