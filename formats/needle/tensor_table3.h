// The Needle 3 directory: the canonical name, kind and logical shape of every position of a
// generation-3 .cact, derived from the geometry (a second table beside tensor_table.h, in
// its TensorSpec terms; hada_p1 and hada_p2 are TensorKind::kPermutation).
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "formats/needle/geometry3.h"
#include "formats/needle/tensor_table.h"

namespace cact {

// Probe head codes of heads.manifest, in their canonical order.
enum class ProbeHead3 : uint8_t { kEmbedding = 1, kConfidence = 2, kRouter = 3 };

struct ProbeHead3Spec {
  ProbeHead3 kind = ProbeHead3::kConfidence;
  uint32_t probes = 0;   // k: probes per pooled row (rows = embedding + each layer)
  uint32_t queries = 0;  // q
  uint32_t out_dim = 0;
  // CQ probes [(L+1)*k, d]; false: the earlier all-float layout with probes [L+1, k, d].
  bool quantized = true;
  std::string name() const;       // "embedding_head", "confidence_head", "router_head"
  uint32_t record_count() const;  // probes, gain, query, row_bias, proj, bias (+ calibration)
};

// What the header does not say and the records do (read from layer 0 and the heads).
struct Layout3Options {
  bool headwise_gate = false;   // gate_proj [num_heads, d] instead of [num_heads*v_head_dim, d]
  bool untied_factors = false;  // Monarch factors per block: w*a [b, a, a], w*b [a, b, b]
  std::vector<ProbeHead3Spec> heads;
};

// Records of one layer: 24, or 27 with the QKV convolution taps.
uint32_t PerLayerTensorCount3(const Geometry3& g);
// Records from `embedding` through `final_norm` (no heads, no tokenizer).
uint32_t CoreTensorCount3(const Geometry3& g);
// Records the heads add after final_norm: 0 without heads, else the manifest and each head's.
uint32_t HeadTensorCount3(const std::vector<ProbeHead3Spec>& heads);

// The canonical directory, in order. Shapes are computed in 32 bits: callers have checked
// the geometry (header3.h) and the heads' sizes first.
std::vector<TensorSpec> CanonicalLayout3(const Geometry3& g, const Layout3Options& o);

}  // namespace cact
