// Deterministic synthetic models with the official geometry: float weights whose value
// ranges mirror those of the official exporter's fixtures (every component matters
// numerically: norm offsets, gates, Hadamard diagonals, mHC coefficients, engram taps are
// all away from their init values), plus a real SentencePiece tokenizer trained on Debian
// text (quant/data/). Quantize the weights with cact-quant's build pipeline.
#pragma once
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/header.h"
#include "formats/needle/tensor_table.h"
#include "formats/safetensors.h"
#include "formats/tokenizer_blob.h"

namespace cact {

struct SyntheticPreset {
  std::string name;
  std::string description;
  Geometry geometry;
  std::vector<ProbeHeadSpec> heads;
  std::string scheme;  // default bits map
  uint32_t group = 128;
};

// "needle2": the released geometry (405 tensors). "small": a fast model for tests
// (vocab 512, d 128, 4 layers, both probe heads).
absl::StatusOr<SyntheticPreset> FindSyntheticPreset(const std::string& name);
std::vector<std::string> SyntheticPresetNames();

// Float weights, one tensor per directory position except the tokenizer, canonical names,
// logical [out, in] shapes; __metadata__ as the fixtures' weights.safetensors (config JSON in
// the official key style, bits_map, seed, group, kv_window_header) plus "cact_geometry".
Safetensors GenerateSyntheticWeights(const SyntheticPreset& preset, uint64_t seed);

// The preset's tokenizer as a .cact RAW blob (from the committed SentencePiece model).
absl::StatusOr<TokenizerBlob> SyntheticTokenizer(const SyntheticPreset& preset);

// Official-style config JSON (vocab_size, d_model, engram_layers, ...) for a geometry.
std::string OfficialConfigJson(const Geometry& g, const std::vector<ProbeHeadSpec>& heads);

}  // namespace cact
