#include "engine/fast_path_limits.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace cact {

uint64_t FastKvCacheBytes(const Geometry& g, const AttentionWindow& attn) {
  const uint64_t sink = std::min(attn.sink, g.max_seq_len);
  const uint64_t rest = g.max_seq_len - sink;
  // The cache keeps a little slack beyond the window for chunked prefill (<= 64 rows).
  const uint64_t ring =
      attn.window == 0 ? rest : std::min<uint64_t>(rest, uint64_t(attn.window) + 64);
  const uint64_t rows = sink + std::max<uint64_t>(ring, 1);
  return uint64_t(g.num_layers) * g.num_kv_heads * rows * (2 * uint64_t(g.head_dim) + 8);
}

absl::Status CheckFastPathSupports(const Geometry& g, const AttentionWindow& attn) {
  auto refuse = [](const std::string& what) {
    return absl::UnimplementedError("the fast path does not support " + what +
                                    "; run the FP32 reference path instead");
  };
  const uint64_t kv = FastKvCacheBytes(g, attn);
  if (kv > kFastMaxKvBytes)
    return refuse(
        absl::StrFormat("a %d MiB KV cache (window %d, sink %d, max_seq_len %d; at most %d MiB): "
                        "set a smaller attention window",
                        kv >> 20, attn.window, attn.sink, g.max_seq_len, kFastMaxKvBytes >> 20));
  return absl::OkStatus();
}

}  // namespace cact
