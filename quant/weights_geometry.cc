#include "quant/weights_geometry.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "formats/needle/named_geometries.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"

namespace cact {
namespace {

constexpr uint32_t kOfficialEngramSubDim = 128;  // exporter default when engram_heads = 0

uint32_t NextPow2(uint32_t x) {
  uint32_t p = 1;
  while (p < x) p <<= 1;
  return p;
}

std::string ShapeText(const std::vector<uint32_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

absl::Status ValidateGeometry(const Geometry& g, size_t num_heads, const std::string& file) {
  Header h;
  h.geometry = g;
  h.num_tensors = TotalTensorCount(g, num_heads);
  return ValidateHeader(h, file);
}

const FloatTensor* Need(const Safetensors& w, const std::string& name, size_t ndim,
                        const std::string& file, absl::Status* st) {
  const FloatTensor* t = w.Find(name);
  if (!t) {
    if (st->ok())
      *st = FileError(file, "tensor '" + name + "' is missing (needed to infer the geometry)");
    return nullptr;
  }
  if (t->shape.size() != ndim) {
    if (st->ok())
      *st = FileError(file, absl::StrFormat("tensor '%s' has shape %s, expected %d dimensions",
                                            name, ShapeText(t->shape), ndim));
    return nullptr;
  }
  return t;
}

}  // namespace

uint32_t ExporterKvWindow(const Geometry& g, uint32_t config_window) {
  constexpr uint64_t kBudgetBytes = 11 * 1024 * 1024 + 512 * 1024;
  constexpr uint64_t kScaleGroup = 32, kMinWindow = 160;
  const uint64_t kv = g.kv_dim(), d = g.d_model;
  const uint64_t per_position = uint64_t(g.num_layers) * (2 * kv + 2 * (kv / kScaleGroup) * 4) +
                                uint64_t(g.num_engram_sites) * (d + (d / kScaleGroup) * 4);
  const uint64_t fits =
      per_position ? kBudgetBytes / per_position / kScaleGroup * kScaleGroup : g.max_seq_len;
  const uint64_t budget = std::max<uint64_t>(kMinWindow, std::min<uint64_t>(fits, g.max_seq_len));
  return uint32_t(config_window ? std::min<uint64_t>(budget, config_window) : budget);
}

absl::StatusOr<Geometry> GeometryFromOfficialConfig(const std::string& json, uint32_t kv_window,
                                                    const std::string& file) {
  nlohmann::json c = nlohmann::json::parse(json, nullptr, false);
  if (c.is_discarded() || !c.is_object()) return FileError(file, "config is not a JSON object");
  auto get = [&](const char* key, uint64_t fallback, bool required) -> absl::StatusOr<uint64_t> {
    if (!c.contains(key) || c[key].is_null()) {
      if (required) return FileError(file, absl::StrFormat("config has no '%s'", key));
      return fallback;
    }
    if (!c[key].is_number_unsigned() && !(c[key].is_number_integer() && c[key].get<int64_t>() >= 0))
      return FileError(file, absl::StrFormat("config '%s' is not a non-negative integer", key));
    uint64_t v = c[key].get<uint64_t>();
    if (v > (1u << 30))
      return FileError(file, absl::StrFormat("config '%s' = %d is too large", key, v));
    return v;
  };
  auto list = [&](const char* key,
                  std::vector<uint32_t> fallback) -> absl::StatusOr<std::vector<uint32_t>> {
    if (!c.contains(key)) return fallback;
    if (!c[key].is_array())
      return FileError(file, absl::StrFormat("config '%s' is not a list", key));
    std::vector<uint32_t> out;
    for (const auto& v : c[key]) {
      if (!v.is_number_unsigned())
        return FileError(file, absl::StrFormat("config '%s' has a bad entry", key));
      out.push_back(v.get<uint32_t>());
    }
    return out;
  };
  Geometry g;
  CACT_ASSIGN_OR_RETURN(uint64_t vocab, get("vocab_size", 0, true));
  CACT_ASSIGN_OR_RETURN(uint64_t d, get("d_model", 0, true));
  CACT_ASSIGN_OR_RETURN(uint64_t attn, get("attn_dim", 0, false));
  CACT_ASSIGN_OR_RETURN(uint64_t heads, get("num_heads", 0, true));
  CACT_ASSIGN_OR_RETURN(uint64_t kv_heads, get("num_kv_heads", heads, false));
  CACT_ASSIGN_OR_RETURN(uint64_t layers, get("num_layers", 0, true));
  CACT_ASSIGN_OR_RETURN(uint64_t max_seq, get("max_seq_len", 2048, false));
  CACT_ASSIGN_OR_RETURN(uint64_t lanes, get("mhc_lanes", 4, false));
  CACT_ASSIGN_OR_RETURN(uint64_t slots, get("engram_slots", 0, true));
  CACT_ASSIGN_OR_RETURN(uint64_t engram_heads, get("engram_heads", 0, false));
  CACT_ASSIGN_OR_RETURN(uint64_t kv_bits, get("kv_bits", 8, false));
  CACT_ASSIGN_OR_RETURN(uint64_t config_window, get("kv_window", 0, false));
  CACT_ASSIGN_OR_RETURN(std::vector<uint32_t> orders, list("engram_orders", {2, 3}));
  CACT_ASSIGN_OR_RETURN(std::vector<uint32_t> sites, list("engram_layers", {2, 15}));
  if (heads == 0 || d == 0) return FileError(file, "config num_heads and d_model must be positive");
  if (orders.empty() || orders.size() > 4)
    return FileError(file, "config engram_orders must have 1 to 4 entries");
  if (sites.size() > 4) return FileError(file, "config engram_layers has more than 4 sites");
  if (attn == 0) attn = d;
  if (engram_heads == 0)
    engram_heads = std::max<uint64_t>(1, d / (orders.size() * kOfficialEngramSubDim));
  const uint64_t tables = orders.size() * engram_heads;
  g.vocab = uint32_t(vocab);
  g.d_model = uint32_t(d);
  g.num_heads = uint32_t(heads);
  g.num_kv_heads = uint32_t(kv_heads);
  g.head_dim = uint32_t(attn / heads);
  g.num_layers = uint32_t(layers);
  g.max_seq_len = uint32_t(max_seq);
  g.hada_n = NextPow2(g.d_model);
  g.mhc_lanes = uint32_t(lanes);
  g.engram_slots = uint32_t(slots);
  g.num_engram_tables = uint32_t(tables);
  g.engram_sub_dim = uint32_t(d / tables);
  g.engram_conv_taps = 4;
  g.num_engram_orders = uint32_t(orders.size());
  g.engram_orders = {0, 0, 0, 0};
  std::copy(orders.begin(), orders.end(), g.engram_orders.begin());
  g.engram_conv_dilation = *std::max_element(orders.begin(), orders.end());
  g.num_engram_sites = uint32_t(sites.size());
  g.engram_sites = {0, 0, 0, 0};
  std::copy(sites.begin(), sites.end(), g.engram_sites.begin());
  g.kv_bits = uint32_t(kv_bits);
  g.kv_window = kv_window ? kv_window : uint32_t(config_window);
  if (c.contains("rope_theta") && c["rope_theta"].is_number())
    g.rope_theta = c["rope_theta"].get<float>();
  if (attn % heads || d % tables)
    return FileError(
        file,
        absl::StrFormat("config sizes do not divide: attn_dim %d / num_heads %d, d_model %d / "
                        "%d engram tables",
                        attn, heads, d, tables));
  CACT_RETURN_IF_ERROR(ValidateGeometry(g, 0, file + " (config)"));
  return g;
}

absl::StatusOr<std::vector<ProbeHeadSpec>> ProbeHeadsFromWeights(const Safetensors& w,
                                                                 const std::string& file) {
  std::vector<ProbeHeadSpec> heads;
  const FloatTensor* manifest = w.Find("heads.manifest");
  if (!manifest) return heads;
  if (manifest->shape.size() != 1 || manifest->data.empty() || manifest->data.size() > 2)
    return FileError(file, "heads.manifest must be a vector of 1 or 2 head codes");
  for (float code : manifest->data) {
    ProbeHeadSpec h;
    if (code == 1.0f) {
      h.kind = ProbeHead::kContrastive;
    } else if (code == 2.0f) {
      h.kind = ProbeHead::kConfidence;
    } else {
      return FileError(
          file, absl::StrFormat("heads.manifest code %.9g is not 1 (contrastive) or 2 (confidence)",
                                code));
    }
    for (const ProbeHeadSpec& other : heads)
      if (other.kind == h.kind) return FileError(file, "heads.manifest lists a head twice");
    const FloatTensor* probes = w.Find(h.name() + ".probes");
    const FloatTensor* proj = w.Find(h.name() + ".proj");
    if (!probes || !proj || probes->shape.size() != 2 || proj->shape.size() != 2)
      return FileError(
          file, "heads.manifest lists " + h.name() + " but its .probes/.proj [2-D] are missing");
    h.probes = probes->shape[0];
    h.out_dim = proj->shape[0];
    heads.push_back(h);
  }
  return heads;
}

absl::StatusOr<Geometry> InferGeometryFromShapes(const Safetensors& w, const std::string& file,
                                                 std::string* assumed) {
  absl::Status st;
  const FloatTensor* emb = Need(w, "embedding", 2, file, &st);
  const FloatTensor* q = Need(w, "layer00.q_proj", 2, file, &st);
  const FloatTensor* k = Need(w, "layer00.k_proj", 2, file, &st);
  const FloatTensor* qn = Need(w, "layer00.q_norm", 1, file, &st);
  const FloatTensor* d1 = Need(w, "layer00.d1", 1, file, &st);
  const FloatTensor* bpre = Need(w, "mhc_b_pre", 2, file, &st);
  CACT_RETURN_IF_ERROR(st);
  Geometry g;
  g.vocab = emb->shape[0];
  g.d_model = emb->shape[1];
  g.head_dim = qn->shape[0];
  if (g.head_dim == 0 || q->shape[0] % g.head_dim || k->shape[0] % g.head_dim)
    return FileError(file, "q_proj/k_proj rows are not a multiple of q_norm's head_dim");
  g.num_heads = q->shape[0] / g.head_dim;
  g.num_kv_heads = k->shape[0] / g.head_dim;
  g.hada_n = d1->shape[0];
  g.num_layers = bpre->shape[0];
  g.mhc_lanes = bpre->shape[1];
  uint32_t sites = 0;
  while (w.Find(absl::StrCat("engram", sites, ".tables"))) ++sites;
  if (sites > 4) return FileError(file, "more than 4 engram sites");
  g.num_engram_sites = sites;
  if (sites > 0) {
    const FloatTensor* tables = Need(w, "engram0.tables", 2, file, &st);
    CACT_RETURN_IF_ERROR(st);
    g.engram_sub_dim = tables->shape[1];
    if (g.engram_sub_dim == 0 || g.d_model % g.engram_sub_dim)
      return FileError(file, "engram0.tables width does not divide d_model");
    g.num_engram_tables = g.d_model / g.engram_sub_dim;
    if (tables->shape[0] % g.num_engram_tables)
      return FileError(file, "engram0.tables rows are not a multiple of the table count");
    g.engram_slots = tables->shape[0] / g.num_engram_tables;
  }
  std::vector<std::string> notes = {"engram orders 2,3", "rope_theta 1e5", "max_seq_len 2048",
                                    "kv_window 256", "kv_bits 8"};
  g.num_engram_orders = 2;
  g.engram_orders = {2, 3, 0, 0};
  g.engram_conv_dilation = 3;
  g.rope_theta = 100000.0f;
  g.max_seq_len = 2048;
  g.kv_window = 256;
  g.kv_bits = 8;
  const Geometry released = Needle2Geometry();
  if (sites == released.num_engram_sites && g.num_layers == released.num_layers) {
    g.engram_sites = released.engram_sites;
    notes.push_back("engram sites 2,15");
  } else if (sites > 0) {
    return FileError(
        file,
        "the engram site layers cannot be inferred from shapes (not the released 27-layer, "
        "2-site geometry): give a base .cact or the official config, or add 'config' to the "
        "metadata");
  }
  if (assumed) *assumed = absl::StrJoin(notes, ", ");
  CACT_RETURN_IF_ERROR(ValidateGeometry(g, 0, file + " (shapes)"));
  return g;
}

namespace {

// A branch-free scan (all-ones exponent = inf or NaN) that vectorizes; the slow search for
// the index runs only when it fails.
bool AllFinite(const std::vector<float>& v) {
  uint32_t bad = 0;
  for (float f : v) {
    uint32_t bits;
    std::memcpy(&bits, &f, 4);
    bad |= uint32_t((bits & 0x7f800000u) == 0x7f800000u);
  }
  return bad == 0;
}

}  // namespace

absl::Status CheckWeightsMatchLayout(const Safetensors& w, const std::vector<TensorSpec>& layout,
                                     const std::string& file) {
  std::map<std::string, const TensorSpec*> wanted;
  for (const TensorSpec& t : layout)
    if (t.kind != TensorKind::kTokenizer) wanted[t.name] = &t;
  for (const FloatTensor& t : w.tensors)
    if (!wanted.count(t.name))
      return FileError(
          file, "unexpected tensor '" + t.name + "': not a tensor of this model's .cact layout");
  for (const auto& [name, spec] : wanted) {
    const FloatTensor* t = w.Find(name);
    if (!t) return FileError(file, "tensor '" + name + "' is missing");
    if (t->shape != spec->shape)
      return FileError(file, absl::StrFormat("tensor '%s' has shape %s but the geometry needs %s",
                                             name, ShapeText(t->shape), ShapeText(spec->shape)));
    CACT_RETURN_IF_ERROR(CheckTensorFinite(*t, file));
  }
  return absl::OkStatus();
}

absl::Status CheckTensorFinite(const FloatTensor& t, const std::string& file) {
  if (AllFinite(t.data)) return absl::OkStatus();
  for (size_t i = 0; i < t.data.size(); ++i)
    if (!std::isfinite(t.data[i]))
      return FileError(file, absl::StrFormat("tensor '%s' has a non-finite value (%g) at flat "
                                             "index %d",
                                             t.name, t.data[i], i));
  return absl::OkStatus();
}

absl::StatusOr<WeightsModel> DescribeWeights(const Safetensors& w, const std::string& file,
                                             const std::string& config_json, const Geometry* base,
                                             uint32_t kv_window_override) {
  WeightsModel m;
  uint32_t header_window = 0;
  if (auto it = w.metadata.find("kv_window_header"); it != w.metadata.end()) {
    char* end = nullptr;
    unsigned long v = std::strtoul(it->second.c_str(), &end, 10);
    if (end && *end == '\0' && v < (1u << 30)) header_window = uint32_t(v);
  }
  if (!config_json.empty()) {
    CACT_ASSIGN_OR_RETURN(m.geometry, GeometryFromOfficialConfig(config_json, header_window,
                                                                 file + " (official config)"));
    m.geometry_source = "--config";
  } else if (auto it = w.metadata.find("config"); it != w.metadata.end()) {
    CACT_ASSIGN_OR_RETURN(
        m.geometry, GeometryFromOfficialConfig(it->second, header_window, file + " metadata"));
    auto label = w.metadata.find("config_source");  // who wrote the weights, when known
    m.geometry_source = label != w.metadata.end() ? label->second : "safetensors metadata config";
  } else if (base) {
    m.geometry = *base;
    m.geometry_source = "base file";
  } else {
    std::string assumed;
    CACT_ASSIGN_OR_RETURN(m.geometry, InferGeometryFromShapes(w, file, &assumed));
    m.geometry_source = "tensor shapes (assumed as released: " + assumed + ")";
  }
  if (base && !m.geometry_source.starts_with("base")) {
    // The weights must describe the base's model; only the window may differ.
    Geometry a = m.geometry, b = *base;
    a.kv_window = b.kv_window = 0;
    if (SerializeHeader(Header{kCactTag, 0, 28, a}) != SerializeHeader(Header{kCactTag, 0, 28, b}))
      return FileError(
          file, "the weights' geometry (" + m.geometry_source + ") differs from the base file's");
    m.geometry.kv_window = base->kv_window;  // a rebuild keeps the base's header
  }
  if (kv_window_override) m.geometry.kv_window = kv_window_override;
  CACT_ASSIGN_OR_RETURN(m.heads, ProbeHeadsFromWeights(w, file));
  CACT_RETURN_IF_ERROR(ValidateGeometry(m.geometry, m.heads.size(), file));
  CACT_RETURN_IF_ERROR(CheckWeightsMatchLayout(w, CanonicalLayout(m.geometry, m.heads), file));
  return m;
}

}  // namespace cact
