#include "formats/needle/tensor_table.h"

#include "absl/strings/str_format.h"

namespace cact {

namespace {

constexpr uint32_t kPerLayerTensors = 14;  // norm_in .. d3
constexpr uint32_t kMhcTensors = 9;        // a_pre/post/res, b_pre/post/res, phi_pre/post/res
constexpr uint32_t kPerSiteTensors = 4;    // tables, key_proj, value_proj, taps
constexpr uint32_t kPerHeadTensors = 3;    // probes, proj, bias

}  // namespace

std::string ProbeHeadSpec::name() const {
  return kind == ProbeHead::kContrastive ? "contrastive_head" : "confidence_head";
}

uint32_t CoreTensorCount(const Geometry& g) {
  return 1 + kPerLayerTensors * g.num_layers + kMhcTensors + kPerSiteTensors * g.num_engram_sites +
         1;
}

uint32_t TotalTensorCount(const Geometry& g, size_t num_heads) {
  const uint32_t heads = num_heads ? 1 + kPerHeadTensors * uint32_t(num_heads) : 0;
  return CoreTensorCount(g) + heads + 1;
}

std::optional<uint32_t> ProbeHeadCount(const Geometry& g, uint32_t num_tensors) {
  const uint64_t without = uint64_t(CoreTensorCount(g)) + 1;
  if (num_tensors < without) return std::nullopt;
  const uint64_t extra = num_tensors - without;
  if (extra == 0) return 0u;
  if (extra < 1 + kPerHeadTensors || (extra - 1) % kPerHeadTensors != 0) return std::nullopt;
  return uint32_t((extra - 1) / kPerHeadTensors);
}

std::vector<TensorSpec> CanonicalLayout(const Geometry& g,
                                        const std::vector<ProbeHeadSpec>& heads) {
  const uint32_t d = g.d_model, A = g.attn_dim(), K = g.kv_dim(), n = g.hada_n, m = g.mhc_lanes;
  const uint32_t L = g.num_layers, hd = g.head_dim;
  std::vector<TensorSpec> out;
  out.reserve(TotalTensorCount(g, heads.size()));
  auto matrix = [&](std::string name, uint32_t rows, uint32_t cols) {
    out.push_back({std::move(name), TensorKind::kMatrix, {rows, cols}});
  };
  auto vec = [&](std::string name, std::vector<uint32_t> shape) {
    out.push_back({std::move(name), TensorKind::kVector, std::move(shape)});
  };

  matrix("embedding", g.vocab, d);
  for (uint32_t l = 0; l < L; ++l) {
    const std::string p = absl::StrFormat("layer%02d.", l);
    vec(p + "norm_in", {d});
    matrix(p + "q_proj", A, d);
    matrix(p + "k_proj", K, d);
    matrix(p + "v_proj", K, d);
    vec(p + "q_norm", {hd});
    vec(p + "k_norm", {hd});
    matrix(p + "gate_proj", A, d);
    matrix(p + "out_proj", d, A);
    vec(p + "post_norm", {d});
    vec(p + "attn_gate", {1});
    vec(p + "pre_hada", {d});
    vec(p + "d1", {n});
    vec(p + "d2", {n});
    vec(p + "d3", {n});
  }
  vec("mhc_a_pre", {L});
  vec("mhc_a_post", {L});
  vec("mhc_a_res", {L});
  vec("mhc_b_pre", {L, m});
  vec("mhc_b_post", {L, m});
  vec("mhc_b_res", {L, m, m});
  matrix("mhc_phi_pre", L * m, m * d);
  matrix("mhc_phi_post", L * m, m * d);
  matrix("mhc_phi_res", L * m * m, m * d);
  const uint32_t T = g.num_engram_tables, S = g.engram_slots, s = g.engram_sub_dim;
  for (uint32_t site = 0; site < g.num_engram_sites; ++site) {
    const std::string p = absl::StrFormat("engram%d.", site);
    matrix(p + "tables", T * S, s);
    matrix(p + "key_proj", d, T * s);
    matrix(p + "value_proj", d, T * s);
    vec(p + "taps", {g.engram_conv_taps, d});
  }
  vec("final_norm", {d});
  if (!heads.empty()) {
    vec("heads.manifest", {uint32_t(heads.size())});
    for (const ProbeHeadSpec& h : heads) {
      const std::string p = h.name() + ".";
      vec(p + "probes", {h.probes, d});
      vec(p + "proj", {h.out_dim, h.probes * d});
      vec(p + "bias", {h.out_dim});
    }
  }
  out.push_back({"tokenizer", TensorKind::kTokenizer, {}});
  return out;
}

std::string SchemeMatchName(const std::string& canonical) {
  // "layerNN." (any number of digits) -> "attn."
  if (canonical.rfind("layer", 0) == 0) {
    size_t i = 5;
    while (i < canonical.size() && canonical[i] >= '0' && canonical[i] <= '9') ++i;
    if (i > 5 && i < canonical.size() && canonical[i] == '.')
      return "attn." + canonical.substr(i + 1);
  }
  return canonical;
}

}  // namespace cact
