#include "formats/needle/tensor_table.h"

#include "absl/strings/str_format.h"
#include "formats/needle/shared_tensors.h"

namespace cact {

namespace {

constexpr uint32_t kPerLayerTensors = 14;  // norm_in .. d3
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
  const uint32_t d = g.d_model, A = g.attn_dim(), K = g.kv_dim(), n = g.hada_n;
  const uint32_t hd = g.head_dim;
  TensorList t(TotalTensorCount(g, heads.size()));
  t.Matrix("embedding", g.vocab, d);
  for (uint32_t l = 0; l < g.num_layers; ++l) {
    const std::string p = absl::StrFormat("layer%02d.", l);
    t.Vector(p + "norm_in", {d});
    t.Matrix(p + "q_proj", A, d);
    t.Matrix(p + "k_proj", K, d);
    t.Matrix(p + "v_proj", K, d);
    t.Vector(p + "q_norm", {hd});
    t.Vector(p + "k_norm", {hd});
    t.Matrix(p + "gate_proj", A, d);
    t.Matrix(p + "out_proj", d, A);
    t.Vector(p + "post_norm", {d});
    t.Vector(p + "attn_gate", {1});
    t.Vector(p + "pre_hada", {d});
    t.Vector(p + "d1", {n});
    t.Vector(p + "d2", {n});
    t.Vector(p + "d3", {n});
  }
  t.Mhc(g.num_layers, g.mhc_lanes, d);
  for (uint32_t site = 0; site < g.num_engram_sites; ++site)
    t.EngramSite(site, g.num_engram_tables, g.engram_slots, g.engram_sub_dim, d,
                 g.engram_conv_taps);
  t.Vector("final_norm", {d});
  if (!heads.empty()) {
    t.Vector("heads.manifest", {uint32_t(heads.size())});
    for (const ProbeHeadSpec& h : heads) {
      const std::string p = h.name() + ".";
      t.Vector(p + "probes", {h.probes, d});
      t.Vector(p + "proj", {h.out_dim, h.probes * d});
      t.Vector(p + "bias", {h.out_dim});
    }
  }
  t.Add("tokenizer", TensorKind::kTokenizer, {});
  return t.Take();
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
