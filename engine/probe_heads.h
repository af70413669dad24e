// The optional probe heads (spec section 3, "Probe heads"): attention pooling of learned
// probe vectors over every (token, layer) cell, then a projection. Not needed for logits.
#pragma once
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

}  // namespace cact
