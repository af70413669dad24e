// The summary rows and JSON of a generation-3 file: what differs from Needle 2 (head widths,
// attention window and global layers, QKV taps, the Monarch Hadamard MLP, 16 engram sites,
// the heads with their queries) in the same shape as info.cc's rows.
#include "tools/cact-inspect/info3.h"

#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "formats/cact/geometry3_json.h"
#include "lib/counted.h"
#include "tools/cact-inspect/table.h"

namespace cact::inspect {
namespace {

std::vector<uint32_t> GlobalLayers(const Geometry3& g) {
  std::vector<uint32_t> layers;
  for (uint32_t l = 0; l < g.num_layers; ++l)
    if (g.IsGlobalLayer(l)) layers.push_back(l);
  return layers;
}

std::string HeadsText(const Cact3File& f) {
  std::vector<std::string> parts;
  for (const ProbeHead3Spec& h : f.probe_heads())
    parts.push_back(absl::StrFormat(
        "%s (%s x %s, %s -> %d%s)", h.name(), Counted(f.geometry().num_layers + 1, "row"),
        Counted(h.probes, "probe"), Counted(h.queries, "query", "queries"), h.out_dim,
        h.quantized ? "" : ", all float"));
  return parts.empty() ? "none" : absl::StrJoin(parts, ", ");
}

}  // namespace

SummaryRows SummaryRows3(const Cact3File& f, const SummaryFacts& facts) {
  const Geometry3& g = f.geometry();
  SummaryRows rows;
  auto row = [&](const char* k, const std::string& v) { rows.emplace_back(k, v); };
  row("file", FileText(f.records()));
  row("sha256", facts.sha256);
  row("generation", absl::StrFormat("Needle 3 (generation 3, .cact tag 0x%08X, %s)", f.header().tag,
                                    Counted(f.header().num_tensors, "tensor")));
  row("support", "read only: this version runs, rebuilds and converts generation 2 files");
  row("parameters", ParametersText(facts.accounting));
  // Not a cact-quant scheme: the rules match canonical names, layers unfolded.
  row("widths", facts.scheme.empty()
                    ? "(no CQ records)"
                    : absl::StrFormat("%s (CQ widths by the longest matching prefix of the "
                                      "canonical name; inferred from the records)",
                                      facts.scheme));
  row("geometry",
      absl::StrFormat("vocab %s (output rows %s), d_model %d, %s, %d/%d heads x q/k %d v %d, "
                      "max_seq_len %s",
                      Thousands(g.vocab), Thousands(g.output_rows()), g.d_model,
                      Counted(g.num_layers, "layer"), g.num_heads, g.num_kv_heads, g.qk_head_dim,
                      g.v_head_dim, Thousands(g.max_seq_len)));
  row("attention",
      absl::StrFormat("sliding window %s, global layers [%s], QKV conv %s, gate per %s",
                      g.sliding_window ? Thousands(g.sliding_window) : std::string("none"),
                      absl::StrJoin(GlobalLayers(g), ","),
                      g.qkv_conv_taps ? Counted(g.qkv_conv_taps, "tap") : std::string("none"),
                      f.layout().headwise_gate ? "head" : "element"));
  const auto [a, b] = g.hada_blocks();
  row("blocks", absl::StrFormat("Hadamard MLP n=%d (Monarch %d x %d, %s factors, cond rank %d), "
                                "mHC %d lanes, RoPE theta %g",
                                g.hada_n, a, b, f.layout().untied_factors ? "per-block" : "shared",
                                kHadaCondRank, g.mhc_lanes, g.rope_theta));
  row("engram",
      EngramText(Used(g.engram_sites, g.num_engram_sites),
                 Used(g.engram_orders, g.num_engram_orders), g.num_engram_tables, g.engram_slots,
                 g.engram_sub_dim, g.engram_conv_taps, g.engram_conv_dilation) +
          absl::StrFormat(", seed heads %d", g.engram_seed_heads));
  row("kv cache", KvCacheText(g.kv_window, g.kv_bits));
  row("codebooks", CodebooksText(f.records()));
  row("heads", HeadsText(f));
  if (facts.tokenizer) row("tokenizer", TokenizerText(*facts.tokenizer));
  return rows;
}

nlohmann::ordered_json Header3Json(const Cact3File& f) {
  nlohmann::ordered_json j{{"tag", absl::StrFormat("0x%08X", f.header().tag)},
                           {"num_tensors", f.header().num_tensors},
                           {"codebook_len", f.header().codebook_len}};
  j.update(Geometry3ToJson(f.geometry()));
  return j;
}

nlohmann::ordered_json Layout3Json(const Cact3File& f) {
  nlohmann::ordered_json heads = nlohmann::ordered_json::array();
  for (const ProbeHead3Spec& h : f.probe_heads())
    heads.push_back({{"name", h.name()},
                     {"code", int(h.kind)},
                     {"probes", h.probes},
                     {"queries", h.queries},
                     {"out_dim", h.out_dim},
                     {"quantized", h.quantized}});
  return {{"global_layers", GlobalLayers(f.geometry())},
          {"gate", f.layout().headwise_gate ? "head" : "element"},
          {"monarch_factors", f.layout().untied_factors ? "per-block" : "shared"},
          {"probe_heads", heads}};
}

}  // namespace cact::inspect
