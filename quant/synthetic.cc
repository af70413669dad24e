#include "quant/synthetic.h"

#include <span>

#include "formats/needle/named_geometries.h"
#include "formats/sentencepiece_model.h"
#include "nlohmann/json.hpp"
#include "quant/cq/numpy_random.h"

// The committed tokenizer models are linked into the library so tools need no data files.
#define CACT_INCBIN(sym, file)                                                                     \
  __asm__(".section .rodata\n.balign 16\n.global " #sym "_begin\n" #sym "_begin:\n.incbin \"" file \
          "\"\n.global " #sym "_end\n" #sym "_end:\n.byte 0\n.previous\n");                        \
  extern "C" const uint8_t sym##_begin[];                                                          \
  extern "C" const uint8_t sym##_end[];

CACT_INCBIN(cact_needle2_tokenizer, CACT_QUANT_DATA_DIR "/needle2_tokenizer.model")
CACT_INCBIN(cact_small_tokenizer, CACT_QUANT_DATA_DIR "/small_tokenizer.model")

namespace cact {
namespace {

// Draws tensors with the value ranges measured on the official fixtures
// (docs/synthetic-models.md lists them). xoshiro256** seeded per tensor (splitmix64 of
// seed and position), so tensors are generated independently and in parallel.
class WeightDrawer {
 public:
  WeightDrawer(uint64_t seed, uint64_t stream) {
    uint64_t x = seed * 0x9E3779B97F4A7C15ull + stream;
    for (auto& s : s_) s = SplitMix(x);
  }
  double Uniform01() { return double(Next() >> 11) * 0x1.0p-53; }
  float Uniform(float lo, float hi) { return lo + (hi - lo) * float(Uniform01()); }
  // numpy's polar method over this generator; unlike numpy, the first value of a pair
  // comes first (the committed synthetic models were drawn in this order).
  float Normal(float mean, float std) {
    if (has_spare_) {
      has_spare_ = false;
      return mean + std * float(spare_);
    }
    const auto [first, second] = PolarNormalPair([this] { return Uniform01(); });
    spare_ = second;
    has_spare_ = true;
    return mean + std * float(first);
  }
  std::vector<float> Normals(size_t n, float mean, float std) {
    std::vector<float> v(n);
    for (auto& x : v) x = Normal(mean, std);
    return v;
  }

 private:
  static uint64_t SplitMix(uint64_t& x) {
    uint64_t z = (x += 0x9E3779B97F4A7C15ull);
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  static uint64_t Rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }
  uint64_t Next() {
    uint64_t r = Rotl(s_[1] * 5, 7) * 9, t = s_[1] << 17;
    s_[2] ^= s_[0];
    s_[3] ^= s_[1];
    s_[1] ^= s_[2];
    s_[0] ^= s_[3];
    s_[2] ^= t;
    s_[3] = Rotl(s_[3], 45);
    return r;
  }
  uint64_t s_[4];
  bool has_spare_ = false;
  double spare_ = 0;
};

size_t Count(const std::vector<uint32_t>& shape) {
  size_t n = 1;
  for (uint32_t s : shape) n *= s;
  return n;
}

bool EndsWith(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// Values for one tensor, chosen by its canonical name.
std::vector<float> DrawTensor(const TensorSpec& spec, const Geometry& g,
                              const std::vector<ProbeHeadSpec>& heads, WeightDrawer& d) {
  const std::string& n = spec.name;
  size_t count = Count(spec.shape);
  if (n == "embedding") return d.Normals(count, 0, 0.1f);
  if (EndsWith(n, "norm_in") || EndsWith(n, "post_norm") || EndsWith(n, "pre_hada") ||
      n == "final_norm")
    return d.Normals(count, 0, 0.2f);
  if (EndsWith(n, "q_norm") || EndsWith(n, "k_norm")) return d.Normals(count, 0.3f, 0.18f);
  if (EndsWith(n, "attn_gate")) return d.Normals(count, 0, 1.2f);
  if (EndsWith(n, ".d1") || EndsWith(n, ".d2")) return d.Normals(count, 1.0f, 0.3f);
  if (EndsWith(n, ".d3")) return d.Normals(count, 0.3f, 0.1f);
  if (n == "mhc_a_pre" || n == "mhc_a_post" || n == "mhc_a_res") {
    std::vector<float> v(count);
    for (auto& x : v) x = d.Uniform(0.3f, 1.0f);
    return v;
  }
  if (n == "mhc_b_pre" || n == "mhc_b_post") return d.Normals(count, 0, 1.0f);
  if (n == "mhc_b_res") {  // strongly diagonal: routing mostly keeps lanes in place
    uint32_t m = g.mhc_lanes;
    std::vector<float> v(count);
    for (size_t i = 0; i < count; ++i) {
      bool diag = (i % (m * m)) / m == (i % m);
      v[i] = diag ? d.Normal(4.0f, 0.4f) : d.Normal(0, 0.5f);
    }
    return v;
  }
  if (n.rfind("mhc_phi", 0) == 0) return d.Normals(count, 0, 0.08f);
  if (EndsWith(n, ".tables")) return d.Normals(count, 0, 1.0f);
  if (EndsWith(n, ".value_proj")) return d.Normals(count, 0, 0.1f);
  if (EndsWith(n, ".taps")) {  // first tap near 1 (current token), dilated taps near 0
    std::vector<float> v(count);
    uint32_t dm = spec.shape[1];
    for (size_t i = 0; i < count; ++i) v[i] = i < dm ? d.Normal(1.0f, 0.36f) : d.Normal(0, 0.4f);
    return v;
  }
  if (n == "heads.manifest") {
    std::vector<float> v;
    for (const auto& h : heads) v.push_back(float(static_cast<int>(h.kind)));
    return v;
  }
  if (EndsWith(n, ".bias")) {  // contrastive head has no bias (zeros stored)
    if (n.rfind("contrastive", 0) == 0) return std::vector<float>(count, 0.0f);
    return d.Normals(count, 0, 0.02f);
  }
  // Attention/engram/probe projections.
  return d.Normals(count, 0, 0.05f);
}

}  // namespace

std::vector<std::string> SyntheticPresetNames() { return {"needle2", "small"}; }

absl::StatusOr<SyntheticPreset> FindSyntheticPreset(const std::string& name) {
  SyntheticPreset p;
  p.name = name;
  p.scheme = "embedding=4,mhc=4,default=2";
  if (name == "needle2") {
    p.description = "released Needle 2 geometry: vocab 8192, d 512, 27 layers, 405 tensors";
    p.geometry = Needle2Geometry();
    p.heads = {{ProbeHead::kContrastive, 4, 128}, {ProbeHead::kConfidence, 8, 1}};
  } else if (name == "small") {
    p.description =
        "test model: vocab 512, d 128, 4 layers, engram sites 1 and 3, both probe heads";
    p.geometry = SmallGeometry();
    p.heads = {{ProbeHead::kContrastive, 4, 32}, {ProbeHead::kConfidence, 8, 1}};
  } else {
    return absl::InvalidArgumentError("unknown synthetic preset '" + name +
                                      "' (known: needle2, small)");
  }
  return p;
}

std::string OfficialConfigJson(const Geometry& g, const std::vector<ProbeHeadSpec>& heads) {
  nlohmann::ordered_json c;
  c["vocab_size"] = g.vocab;
  c["d_model"] = g.d_model;
  c["attn_dim"] = g.attn_dim();
  c["num_heads"] = g.num_heads;
  c["num_kv_heads"] = g.num_kv_heads;
  c["num_layers"] = g.num_layers;
  c["max_seq_len"] = g.max_seq_len;
  c["pad_token_id"] = 0;
  uint32_t contrastive = 128;
  for (const auto& h : heads)
    if (h.kind == ProbeHead::kContrastive) contrastive = h.out_dim;
  c["contrastive_dim"] = contrastive;
  c["rope_theta"] = g.rope_theta;
  c["engram_orders"] =
      std::vector<uint32_t>(g.engram_orders.begin(), g.engram_orders.begin() + g.num_engram_orders);
  c["engram_heads"] = g.heads_per_order();
  c["engram_slots"] = g.engram_slots;
  c["engram_layers"] =
      std::vector<uint32_t>(g.engram_sites.begin(), g.engram_sites.begin() + g.num_engram_sites);
  c["mhc_lanes"] = g.mhc_lanes;
  c["kv_window"] = g.kv_window;
  c["kv_bits"] = g.kv_bits;
  return c.dump();
}

Safetensors GenerateSyntheticWeights(const SyntheticPreset& p, uint64_t seed) {
  std::vector<TensorSpec> layout = CanonicalLayout(p.geometry, p.heads);
  if (!layout.empty() && layout.back().kind == TensorKind::kTokenizer) layout.pop_back();
  Safetensors st;
  st.tensors.resize(layout.size());
#pragma omp parallel for schedule(dynamic, 1)
  for (size_t i = 0; i < layout.size(); ++i) {
    WeightDrawer drawer(seed, i);
    FloatTensor& t = st.tensors[i];
    t.name = layout[i].name;
    t.shape = layout[i].shape;
    t.data = DrawTensor(layout[i], p.geometry, p.heads, drawer);
  }
  st.metadata["config"] = OfficialConfigJson(p.geometry, p.heads);
  st.metadata["bits_map"] = p.scheme;
  st.metadata["seed"] = std::to_string(seed);
  st.metadata["group"] = std::to_string(p.group);
  st.metadata["kv_window_header"] = std::to_string(p.geometry.kv_window);
  st.metadata["synthetic_preset"] = p.name;
  return st;
}

absl::StatusOr<TokenizerBlob> SyntheticTokenizer(const SyntheticPreset& p) {
  const uint8_t* b =
      p.name == "needle2" ? cact_needle2_tokenizer_begin : cact_small_tokenizer_begin;
  const uint8_t* e = p.name == "needle2" ? cact_needle2_tokenizer_end : cact_small_tokenizer_end;
  return ParseSentencePieceModel(std::span<const uint8_t>(b, size_t(e - b)),
                                 p.name + "_tokenizer.model (built in)");
}

}  // namespace cact
