#include "train/geometry_spec.h"

#include <algorithm>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "formats/needle/named_geometries.h"

namespace cact::train {
namespace {

uint32_t NextPow2(uint32_t v) {
  uint32_t p = 1;
  while (p < v) p <<= 1;
  return p;
}

absl::Status ParseUint(std::string_view text, std::string_view key, uint32_t* out) {
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, *out);
  if (ec != std::errc() || p != end || text.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "geometry: '", std::string(key), "=", std::string(text), "' needs a non-negative integer"));
  }
  return absl::OkStatus();
}

absl::Status Check(const Geometry& g) {
  auto bad = [](const std::string& why) { return absl::InvalidArgumentError("geometry: " + why); };
  if (g.num_heads == 0 || g.num_kv_heads == 0 || g.num_heads % g.num_kv_heads)
    return bad("heads must be a positive multiple of kv_heads");
  if (g.head_dim == 0 || g.head_dim % 2) return bad("head_dim must be even and positive");
  if (g.d_model == 0 || g.d_model % g.num_engram_tables)
    return bad("d must be a positive multiple of the engram table count");
  if (g.num_layers == 0) return bad("layers must be positive");
  if (g.vocab < 16) return bad("vocab must be at least 16");
  if (g.max_seq_len < 2) return bad("seq must be at least 2");
  if (g.mhc_lanes == 0) return bad("lanes must be positive");
  for (uint32_t s = 0; s < g.num_engram_sites; ++s)
    if (g.engram_sites[s] >= g.num_layers) return bad("an engram site is past the last layer");
  return absl::OkStatus();
}

}  // namespace

// The named geometries (formats/needle/named_geometries.h) meant for training.
std::vector<std::string> GeometryNames() { return {"reference", "tiny"}; }

std::string DescribeGeometries() {
  std::string out;
  for (const std::string& name : GeometryNames()) {
    const Geometry g = *ParseGeometrySpec(name);
    absl::StrAppendFormat(
        &out,
        "  %-10s vocab %u, d %u, %u layers, %u/%u heads x %u, seq %u, window %u, engram sites %u\n",
        name, g.vocab, g.d_model, g.num_layers, g.num_heads, g.num_kv_heads, g.head_dim,
        g.max_seq_len, g.kv_window, g.num_engram_sites);
  }
  return out;
}

absl::StatusOr<Geometry> ParseGeometrySpec(const std::string& spec) {
  std::vector<std::string> parts = absl::StrSplit(spec, ',');
  const std::vector<std::string> names = GeometryNames();
  if (std::find(names.begin(), names.end(), parts[0]) == names.end())
    return absl::InvalidArgumentError(absl::StrCat("geometry: unknown name '", parts[0],
                                                   "' (known: ", absl::StrJoin(names, ", "), ")"));
  Geometry g = *FindNamedGeometry(parts[0]);
  for (size_t i = 1; i < parts.size(); ++i) {
    std::pair<std::string, std::string> kv = absl::StrSplit(parts[i], absl::MaxSplits('=', 1));
    const std::string& key = kv.first;
    const std::string& val = kv.second;
    if (key == "sites") {
      std::vector<std::string> sites = absl::StrSplit(val, '+', absl::SkipEmpty());
      if (sites.size() > 4) return absl::InvalidArgumentError("geometry: at most 4 engram sites");
      g.engram_sites = {0, 0, 0, 0};
      g.num_engram_sites = uint32_t(sites.size());
      for (size_t s = 0; s < sites.size(); ++s)
        if (auto st = ParseUint(sites[s], key, &g.engram_sites[s]); !st.ok()) return st;
      continue;
    }
    uint32_t v = 0;
    if (auto st = ParseUint(val, key, &v); !st.ok()) return st;
    if (key == "vocab")
      g.vocab = v;
    else if (key == "d") {
      g.d_model = v;
      g.hada_n = NextPow2(v);
    } else if (key == "layers")
      g.num_layers = v;
    else if (key == "heads")
      g.num_heads = v;
    else if (key == "kv_heads")
      g.num_kv_heads = v;
    else if (key == "head_dim")
      g.head_dim = v;
    else if (key == "seq")
      g.max_seq_len = v;
    else if (key == "window")
      g.kv_window = v;
    else if (key == "slots")
      g.engram_slots = v;
    else if (key == "lanes")
      g.mhc_lanes = v;
    else
      return absl::InvalidArgumentError(
          absl::StrCat("geometry: unknown key '", key, "' in '", spec, "'"));
  }
  g.engram_sub_dim = g.d_model / g.num_engram_tables;
  if (auto st = Check(g); !st.ok()) return st;
  Header h;
  h.geometry = g;
  if (auto st = ValidateHeader(h, "geometry '" + spec + "'"); !st.ok()) return st;
  return g;
}

}  // namespace cact::train
