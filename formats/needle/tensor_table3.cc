#include "formats/needle/tensor_table3.h"

#include "absl/strings/str_format.h"

namespace cact {

namespace {

constexpr uint32_t kPerLayerBase = 24;  // norm_in .. cond_u without the taps
constexpr uint32_t kQkvTaps = 3;        // q_taps, k_taps, v_taps
constexpr uint32_t kMhcTensors = 9;
constexpr uint32_t kPermutations = 2;    // hada_p1, hada_p2
constexpr uint32_t kPerSiteTensors = 4;  // tables, key_proj, value_proj, taps

}  // namespace

std::string ProbeHead3Spec::name() const {
  switch (kind) {
    case ProbeHead3::kEmbedding:
      return "embedding_head";
    case ProbeHead3::kConfidence:
      return "confidence_head";
    case ProbeHead3::kRouter:
      return "router_head";
  }
  return "?";
}

uint32_t ProbeHead3Spec::record_count() const { return kind == ProbeHead3::kRouter ? 7 : 6; }

uint32_t PerLayerTensorCount3(const Geometry3& g) {
  return kPerLayerBase + (g.qkv_conv_taps ? kQkvTaps : 0);
}

uint32_t CoreTensorCount3(const Geometry3& g) {
  return 1 + PerLayerTensorCount3(g) * g.num_layers + kMhcTensors + kPermutations +
         kPerSiteTensors * g.num_engram_sites + 1;
}

uint32_t HeadTensorCount3(const std::vector<ProbeHead3Spec>& heads) {
  if (heads.empty()) return 0;
  uint32_t n = 1;
  for (const ProbeHead3Spec& h : heads) n += h.record_count();
  return n;
}

std::vector<TensorSpec3> CanonicalLayout3(const Geometry3& g, const Layout3Options& o) {
  const uint32_t d = g.d_model, n = g.hada_n, m = g.mhc_lanes, L = g.num_layers;
  const uint32_t taps = g.qkv_conv_taps, r = kHadaCondRank;
  const auto [a, b] = g.hada_blocks();
  std::vector<TensorSpec3> out;
  out.reserve(CoreTensorCount3(g) + HeadTensorCount3(o.heads) + 1);
  auto matrix = [&](std::string name, uint32_t rows, uint32_t cols) {
    out.push_back({std::move(name), Storage3::kMatrix, {rows, cols}});
  };
  auto vec = [&](std::string name, std::vector<uint32_t> shape) {
    out.push_back({std::move(name), Storage3::kFloat, std::move(shape)});
  };

  matrix("embedding", g.vocab, d);
  for (uint32_t l = 0; l < L; ++l) {
    const std::string p = absl::StrFormat("layer%02d.", l);
    vec(p + "norm_in", {d});
    matrix(p + "q_proj", g.q_dim(), d);
    matrix(p + "k_proj", g.k_dim(), d);
    matrix(p + "v_proj", g.v_dim(), d);
    if (taps) {
      vec(p + "q_taps", {taps, g.q_dim()});
      vec(p + "k_taps", {taps, g.k_dim()});
      vec(p + "v_taps", {taps, g.v_dim()});
    }
    vec(p + "q_norm", {g.qk_head_dim});
    vec(p + "k_norm", {g.qk_head_dim});
    matrix(p + "gate_proj", o.headwise_gate ? g.num_heads : g.attn_out_dim(), d);
    matrix(p + "out_proj", d, g.attn_out_dim());
    vec(p + "post_norm", {d});
    vec(p + "attn_gate", {1});
    vec(p + "pre_hada", {d});
    for (const char* diag : {"d1", "d2", "b2", "d3", "d4"}) vec(p + diag, {n});
    for (const char* w : {"w1", "w2", "w3"}) {
      vec(p + w + "a", o.untied_factors ? std::vector<uint32_t>{b, a, a} : std::vector{a, a});
      vec(p + w + "b", o.untied_factors ? std::vector<uint32_t>{a, b, b} : std::vector{b, b});
    }
    vec(p + "cond_v", {d, r});
    vec(p + "cond_u", {r, n});
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
  out.push_back({"hada_p1", Storage3::kPermutation, {n}});
  out.push_back({"hada_p2", Storage3::kPermutation, {n}});
  const uint32_t T = g.num_engram_tables, s = g.engram_sub_dim;
  for (uint32_t site = 0; site < g.num_engram_sites; ++site) {
    const std::string p = absl::StrFormat("engram%d.", site);
    matrix(p + "tables", T * g.engram_slots, s);
    matrix(p + "key_proj", d, T * s);
    matrix(p + "value_proj", d, T * s);
    vec(p + "taps", {g.engram_conv_taps, d});
  }
  vec("final_norm", {d});
  if (!o.heads.empty()) {
    vec("heads.manifest", {uint32_t(o.heads.size())});
    const uint32_t rows = L + 1;  // the embedding, then each layer
    for (const ProbeHead3Spec& h : o.heads) {
      const std::string p = h.name() + ".";
      if (h.quantized)
        matrix(p + "probes", rows * h.probes, d);
      else
        vec(p + "probes", {rows, h.probes, d});
      vec(p + "gain", {rows, h.probes});
      matrix(p + "query", h.queries, d);
      vec(p + "row_bias", {h.queries, rows, h.probes});
      matrix(p + "proj", h.out_dim, h.queries * d);
      vec(p + "bias", {h.out_dim});
      if (h.kind == ProbeHead3::kRouter) vec(p + "calibration", {3});
    }
  }
  out.push_back({"tokenizer", Storage3::kTokenizer, {}});
  return out;
}

}  // namespace cact
