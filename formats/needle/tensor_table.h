// Tensor names are positional: this file derives, from the geometry and the probe heads,
// the canonical name, kind and logical shape of every directory position.
#pragma once
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "formats/needle/geometry.h"

namespace cact {

enum class TensorKind : uint8_t {
  kMatrix,       // quantizable [out, in] matrix (CQ by default)
  kVector,       // FP16/FP32 parameter, never CQ (norms, gates, diagonals, mhc, heads)
  kTokenizer,    // RAW tokenizer blob (last)
  kPermutation,  // FP32 holding a permutation of 0 .. n-1 (Needle 3's hada_p1, hada_p2)
};

enum class ProbeHead : uint8_t { kContrastive = 1, kConfidence = 2 };

struct ProbeHeadSpec {
  ProbeHead kind;
  uint32_t probes;           // 4 contrastive, 8 confidence
  uint32_t out_dim;          // contrastive: contrastive_dim (128 released), confidence: 1
  std::string name() const;  // "contrastive_head" / "confidence_head"
};

struct TensorSpec {
  std::string name;  // canonical, e.g. "layer03.q_proj", "engram1.tables"
  TensorKind kind;
  std::vector<uint32_t> shape;  // logical shape; [out, in] for matrices; empty for RAW
};

// Number of tensors from `embedding` through `final_norm` (no heads, no tokenizer).
uint32_t CoreTensorCount(const Geometry& g);
// Total tensor count for the given heads: core + (heads ? 1 + 3*H : 0) + 1 tokenizer.
uint32_t TotalTensorCount(const Geometry& g, size_t num_heads);
// Number of probe heads implied by num_tensors, or nullopt when inconsistent.
std::optional<uint32_t> ProbeHeadCount(const Geometry& g, uint32_t num_tensors);

// The canonical layout, in directory order.
std::vector<TensorSpec> CanonicalLayout(const Geometry& g, const std::vector<ProbeHeadSpec>& heads);

// Names for matching schemes: "layerNN." -> "attn.", e.g. "attn.q_proj";
// "mhc_phi_pre" stays (matches "mhc"), "engram1.tables" stays (matches "engram1"/"engram").
std::string SchemeMatchName(const std::string& canonical);

}  // namespace cact
