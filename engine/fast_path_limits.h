// What the fast path refuses. It handles every geometry the validator accepts (mHC lanes up
// to 64, head_dim up to 4096, any d_model: tests/engine/fast_edge_geometry_test.cc), but its
// int8 KV cache holds window + sink rows of every layer and KV head up front, and a file
// with kv_window 0 and a long max_seq_len (up to 2^24) would ask for terabytes; cact-run
// refuses that with a clear error (set a smaller --window) instead of dying in the
// allocator (tests/reliability/engine_edge_geometry_test.cc). The reference path has no limit.
#pragma once
#include <cstdint>

#include "absl/status/status.h"
#include "engine/forward.h"
#include "formats/cact/header.h"

namespace cact {

inline constexpr uint64_t kFastMaxKvBytes = uint64_t{1} << 30;  // int8 K + V + scales

// Bytes of the fast path's int8 KV cache for this geometry and window (K and V rows of
// every layer and KV head, one float scale each; an upper bound including the ring's slack).
uint64_t FastKvCacheBytes(const Geometry& g, const AttentionWindow& attn);
// OK, or an error naming the limit exceeded and what to do.
absl::Status CheckFastPathSupports(const Geometry& g, const AttentionWindow& attn);

}  // namespace cact
