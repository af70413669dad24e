#include "formats/cact/geometry_json.h"

namespace cact {
namespace {

// One table drives both directions so the two can never disagree.
template <typename Fn>
void ForEachField(Geometry& g, Fn&& fn) {
  fn("kv_window", g.kv_window);
  fn("kv_bits", g.kv_bits);
  fn("vocab", g.vocab);
  fn("d_model", g.d_model);
  fn("num_heads", g.num_heads);
  fn("num_kv_heads", g.num_kv_heads);
  fn("num_layers", g.num_layers);
  fn("head_dim", g.head_dim);
  fn("max_seq_len", g.max_seq_len);
  fn("hada_n", g.hada_n);
  fn("mhc_lanes", g.mhc_lanes);
  fn("engram_slots", g.engram_slots);
  fn("engram_sub_dim", g.engram_sub_dim);
  fn("num_engram_tables", g.num_engram_tables);
  fn("engram_conv_taps", g.engram_conv_taps);
  fn("engram_conv_dilation", g.engram_conv_dilation);
  fn("num_engram_orders", g.num_engram_orders);
  fn("engram_orders", g.engram_orders);
  fn("num_engram_sites", g.num_engram_sites);
  fn("engram_sites", g.engram_sites);
  fn("rope_theta", g.rope_theta);
}

}  // namespace

nlohmann::ordered_json GeometryToJson(const Geometry& geometry) {
  nlohmann::ordered_json j;
  Geometry g = geometry;
  ForEachField(g, [&](const char* key, const auto& value) { j[key] = value; });
  return j;
}

absl::StatusOr<Geometry> GeometryFromJson(const nlohmann::json& j) {
  Geometry g;
  std::string error;
  ForEachField(g, [&](const char* key, auto& value) {
    if (!error.empty()) return;
    auto it = j.find(key);
    if (it == j.end()) {
      error = std::string("geometry: missing key '") + key + "'";
      return;
    }
    try {
      it->get_to(value);
    } catch (const nlohmann::json::exception&) {
      error = std::string("geometry: key '") + key + "' has the wrong type";
    }
  });
  if (!error.empty()) return absl::InvalidArgumentError(error);
  return g;
}

}  // namespace cact
