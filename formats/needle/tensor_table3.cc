#include "formats/needle/tensor_table3.h"

#include "absl/strings/str_format.h"
#include "formats/needle/shared_tensors.h"

namespace cact {

namespace {

constexpr uint32_t kPerLayerBase = 24;  // norm_in .. cond_u without the taps
constexpr uint32_t kQkvTaps = 3;        // q_taps, k_taps, v_taps
constexpr uint32_t kPermutations = 2;   // hada_p1, hada_p2

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

std::vector<TensorSpec> CanonicalLayout3(const Geometry3& g, const Layout3Options& o) {
  const uint32_t d = g.d_model, n = g.hada_n, L = g.num_layers;
  const uint32_t taps = g.qkv_conv_taps, r = kHadaCondRank;
  const auto [a, b] = g.hada_blocks();
  TensorList t(CoreTensorCount3(g) + HeadTensorCount3(o.heads) + 1);
  t.Matrix("embedding", g.vocab, d);
  for (uint32_t l = 0; l < L; ++l) {
    const std::string p = absl::StrFormat("layer%02d.", l);
    t.Vector(p + "norm_in", {d});
    t.Matrix(p + "q_proj", g.q_dim(), d);
    t.Matrix(p + "k_proj", g.k_dim(), d);
    t.Matrix(p + "v_proj", g.v_dim(), d);
    if (taps) {
      t.Vector(p + "q_taps", {taps, g.q_dim()});
      t.Vector(p + "k_taps", {taps, g.k_dim()});
      t.Vector(p + "v_taps", {taps, g.v_dim()});
    }
    t.Vector(p + "q_norm", {g.qk_head_dim});
    t.Vector(p + "k_norm", {g.qk_head_dim});
    t.Matrix(p + "gate_proj", o.headwise_gate ? g.num_heads : g.attn_out_dim(), d);
    t.Matrix(p + "out_proj", d, g.attn_out_dim());
    t.Vector(p + "post_norm", {d});
    t.Vector(p + "attn_gate", {1});
    t.Vector(p + "pre_hada", {d});
    for (const char* diag : {"d1", "d2", "b2", "d3", "d4"}) t.Vector(p + diag, {n});
    for (const char* w : {"w1", "w2", "w3"}) {
      t.Vector(p + w + "a", o.untied_factors ? std::vector<uint32_t>{b, a, a} : std::vector{a, a});
      t.Vector(p + w + "b", o.untied_factors ? std::vector<uint32_t>{a, b, b} : std::vector{b, b});
    }
    t.Vector(p + "cond_v", {d, r});
    t.Vector(p + "cond_u", {r, n});
  }
  t.Mhc(L, g.mhc_lanes, d);
  t.Add("hada_p1", TensorKind::kPermutation, {n});
  t.Add("hada_p2", TensorKind::kPermutation, {n});
  for (uint32_t site = 0; site < g.num_engram_sites; ++site)
    t.EngramSite(site, g.num_engram_tables, g.engram_slots, g.engram_sub_dim, d,
                 g.engram_conv_taps);
  t.Vector("final_norm", {d});
  if (!o.heads.empty()) {
    t.Vector("heads.manifest", {uint32_t(o.heads.size())});
    const uint32_t rows = L + 1;  // the embedding, then each layer
    for (const ProbeHead3Spec& h : o.heads) {
      const std::string p = h.name() + ".";
      if (h.quantized)
        t.Matrix(p + "probes", rows * h.probes, d);
      else
        t.Vector(p + "probes", {rows, h.probes, d});
      t.Vector(p + "gain", {rows, h.probes});
      t.Matrix(p + "query", h.queries, d);
      t.Vector(p + "row_bias", {h.queries, rows, h.probes});
      t.Matrix(p + "proj", h.out_dim, h.queries * d);
      t.Vector(p + "bias", {h.out_dim});
      if (h.kind == ProbeHead3::kRouter) t.Vector(p + "calibration", {3});
    }
  }
  t.Add("tokenizer", TensorKind::kTokenizer, {});
  return t.Take();
}

}  // namespace cact
