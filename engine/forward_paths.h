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

// Independent forwards (perplexity's chunks) run at most this many threads by default.
inline constexpr int kMaxAutoThreads = 8;
// The thread count "0" (auto) means for `path`: for the fast paths, the CPUs this process
// may run on, at most the model's KV heads (`kv_heads`). A forward splits attention by KV
// head, so a thread past them has no head and only adds barrier waits: measured on a
// 16-core Xeon (needle2, 4 KV heads), decode and prefill were fastest at 4 threads and
// 1.5-2.3x slower at 5-16 (docs/benchmarks.md, "The default thread count"). One thread for
// the FP32 reference (the slow oracle; its OpenMP loops degrade badly on a busy machine).
int AutoThreads(std::string_view path, uint32_t kv_heads);
absl::StatusOr<std::unique_ptr<Forward>> MakeForwardPath(const Model& model, std::string_view path,
                                                         const ForwardOptions& options);

}  // namespace cact
