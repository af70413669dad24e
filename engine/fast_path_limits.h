// The geometries the fast path is built for. The format allows more (mHC lanes up to 64,
// head_dim up to 4096, max_seq_len up to 2^24 with no window); the fast path keeps small
// fixed-size scratch and a KV cache of window + sink rows, so it states its limits here and
// cact-run refuses other files with a clear error instead of overrunning a buffer
// (tests/reliability/engine_edge_geometry_test.cc). The reference path has no such limits.
#pragma once
#include <cstdint>

#include "absl/status/status.h"
#include "engine/forward.h"
#include "formats/cact/header.h"

namespace cact {

inline constexpr uint32_t kFastMaxLanes = 8;          // mHC scratch: m <= 8 (m*m <= 64)
inline constexpr uint32_t kFastMaxHeadDim = 512;      // per-row key quantization buffer
inline constexpr uint32_t kFastMinDModel = 8;         // SIMD loops over d in steps of 8
inline constexpr uint64_t kFastMaxKvBytes = uint64_t{1} << 30;  // int8 K + V + scales

// Bytes of the fast path's int8 KV cache for this geometry and window (K and V rows of
// every layer and KV head, one float scale each).
uint64_t FastKvCacheBytes(const Geometry& g, const AttentionWindow& attn);
// OK, or an error naming the header field and the limit it exceeds.
absl::Status CheckFastPathSupports(const Geometry& g, const AttentionWindow& attn);

}  // namespace cact
