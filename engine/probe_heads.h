// The optional probe heads (spec section 3, "Probe heads"): attention pooling of learned
// probe vectors over every (token, layer) cell, then a projection. Not needed for logits.
#pragma once
#include <cmath>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model.h"

namespace cact {

struct ProbeOutputs {
  std::vector<float> retrieval;  // contrastive head, L2-normalised; empty without the head
  bool has_confidence = false;
  float confidence = 0;  // confidence head logit
};

// How the lane means are laid out: [L][T][d] (Forward::hidden()) or [T][L][d]
// (Forward::hidden_by_position(), as recorded: no rearranged copy).
enum class HiddenLayout { kByLayer, kByPosition };

// Cells are, for every token, [e = sqrt(d) * embedding[token], lane mean after each layer]
// (T * (L + 1) vectors) from `hidden` (keep_hidden). Tokens equal to `pad_id` are masked out
// of the softmax.
absl::StatusOr<ProbeOutputs> ComputeProbeHeads(const Model& model, std::span<const int32_t> tokens,
                                               std::span<const float> hidden, int32_t pad_id = 0,
                                               HiddenLayout layout = HiddenLayout::kByLayer);

// The same heads over cells pooled in blocks (a chat prompt's tools prefix and the rest), so
// a prefix's share can be kept instead of its cells (the prompt cache). Per head and probe,
// a block holds its largest score, the sum of exp(score - max) and the exp-weighted sum of
// its cells; Finish combines the blocks in order. The result differs from the one-pass
// ComputeProbeHeads only by float rounding, and is the same bits however each block's pool
// was obtained.
struct ProbeBlock {
  struct Probe {
    float max = -INFINITY;
    float sum = 0;
    std::vector<float> acc;  // [d]
  };
  std::vector<std::vector<Probe>> heads;  // [head][probe], model.probe_heads() order
};

// The pool of tokens[i] / hidden row i (T = tokens.size() rows, layout as above); a block of
// padding only pools nothing (max -inf). `threads` share the probes: the same bits for any
// count.
absl::StatusOr<ProbeBlock> PoolProbeBlock(const Model& model, std::span<const int32_t> tokens,
                                          std::span<const float> hidden, int32_t pad_id,
                                          HiddenLayout layout, int threads = 1);
absl::StatusOr<ProbeOutputs> FinishProbeBlocks(const Model& model,
                                               std::span<const ProbeBlock> blocks);

}  // namespace cact
