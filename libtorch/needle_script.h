// The TorchScript source of the Needle forward pass, written from the spec (cact-spec.md
// section 3), independent of the engine's C++: it is the oracle the engine is checked
// against. Plain strings, no libtorch: export.cc compiles them with Module::define.
//
// Module layout (parameter names == canonical tensor names):
//   top level         embedding, mhc_*, final_norm; methods forward, hidden_states,
//                     [confidence], [retrieval] and helpers
//   layerNN           norm_in, q_proj, ..., d3; methods attention(bx, cos, sin, visible) and
//                     hadamard_mlp(x), called in the order of geometry.block().stages
//   engramS           tables, key_proj, value_proj, taps; method forward(tokens) -> (k, v)
//   heads             manifest (buffer)
//   <head>            probes, proj, bias
#pragma once
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "formats/cact/header.h"
#include "formats/needle/block.h"
#include "formats/needle/tensor_table.h"

namespace cact::torchscript {

struct ScriptConfig {
  Geometry geometry;
  std::vector<ProbeHeadSpec> heads;  // probe heads present in the file, in file order
  uint32_t pad_id = 0;               // masked out of the probe-head pooling
};

// Methods of each `layerNN` submodule.
std::string LayerSource(const ScriptConfig& c);
// Methods of each `engramS` submodule.
std::string EngramSource(const ScriptConfig& c);
// Methods of the top-level module (calls layerNN.forward / engramS.forward).
std::string TopSource(const ScriptConfig& c);

// Submodule names.
std::string LayerModuleName(uint32_t layer);  // "layer03"
std::string EngramModuleName(uint32_t site);  // "engram1"

// Whether the libtorch executors (this emitter and NeedleNet) can run `block`: the RoPE pairing
// a stage order whose layer opens with the pre-mix and closes with the post-mix, and an
// engram hash their int64 emulation computes exactly. The sources above assume it holds.
absl::Status CheckScriptableBlock(const BlockSpec& block);

}  // namespace cact::torchscript
