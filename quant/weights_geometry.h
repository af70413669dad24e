// What model a float-weights safetensors file (canonical names, [out, in], as the
// fixtures' weights.safetensors) describes: its geometry and probe heads, and a check that
// every tensor the .cact layout needs is there with its logical shape, finite.
#pragma once
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/header.h"
#include "formats/needle/tensor_table.h"
#include "formats/safetensors.h"

namespace cact {

// The official exporter's config JSON (vocab_size, d_model, engram_layers, ...) as a
// geometry. `kv_window` is the header value (the exporter writes its budgeted window).
absl::StatusOr<Geometry> GeometryFromOfficialConfig(const std::string& json, uint32_t kv_window,
                                                    const std::string& file);

// The header window the official exporter writes for a model trained with `config_window`
// (0 = none): the largest multiple of 32 positions whose int8 KV cache (per layer K and V
// plus one f32 scale per 32 values, per engram site one d_model row plus its scales) fits
// the runtime's 11.5 MiB budget, clamped to [160, max_seq_len], and at most `config_window`.
uint32_t ExporterKvWindow(const Geometry& g, uint32_t config_window);

// Probe heads from `heads.manifest` (codes 1 contrastive, 2 confidence) and the shapes of
// `<head>.probes` / `<head>.proj`; empty when there is no manifest.
absl::StatusOr<std::vector<ProbeHeadSpec>> ProbeHeadsFromWeights(const Safetensors& w,
                                                                 const std::string& file);

// Geometry from the tensor shapes alone. Shapes fix every size; what they cannot show is
// taken from the released Needle 2 model and listed in *assumed (engram orders 2,3, RoPE
// theta, max_seq_len, kv_window/kv_bits; the engram site layers only when the layer and
// site counts are the released ones, otherwise an error asks for --base or --config).
absl::StatusOr<Geometry> InferGeometryFromShapes(const Safetensors& w, const std::string& file,
                                                 std::string* assumed);

// Every tensor of the layout except the tokenizer is present with its shape and finite
// values; no other tensor is present. Errors name the tensor.
absl::Status CheckWeightsMatchLayout(const Safetensors& w, const std::vector<TensorSpec>& layout,
                                     const std::string& file);
// Every value of `t` finite; else the first non-finite one, naming the tensor and index.
absl::Status CheckTensorFinite(const FloatTensor& t, const std::string& file);

struct WeightsModel {
  Geometry geometry;
  std::vector<ProbeHeadSpec> heads;
  std::string geometry_source;  // "metadata config", "--config", "base", "shapes (assumed: ...)"
};

// Geometry from (in order) an explicit official config JSON, the safetensors metadata
// `config`, the base file, or the shapes; heads from the weights; then the layout check.
// With a base, the geometry must be the base's and its kv_window is kept;
// `kv_window_override` (0 = none) replaces the header window in every case.
absl::StatusOr<WeightsModel> DescribeWeights(const Safetensors& w, const std::string& file,
                                             const std::string& config_json, const Geometry* base,
                                             uint32_t kv_window_override);

}  // namespace cact
