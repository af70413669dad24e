// GCC 12 at -O1 (the sanitizer build) reports a false -Wmaybe-uninitialized inside the
// std::function that std::regex's compiler keeps (GCC bug 105562): the headers are read with
// it off; this file's own code keeps the warning.
#pragma GCC diagnostic push
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include "quant/import/lora.h"

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <limits>
#include <map>
#include <regex>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"
#include "quant/cq/reencode.h"
#include "quant/requant.h"
#include "quant/selective.h"
#include "quant/scheme_inference.h"
#include "quant/tensor_values.h"
#pragma GCC diagnostic pop

namespace cact {
namespace {

const std::vector<std::string>& Projections() {
  static const std::vector<std::string> p = {"q_proj", "k_proj", "v_proj", "gate_proj", "out_proj"};
  return p;
}

int ProjIndex(const std::string& p) {
  for (size_t i = 0; i < Projections().size(); ++i)
    if (Projections()[i] == p) return int(i);
  return -1;
}

// [out, in] of a projection in .cact orientation.
std::pair<uint32_t, uint32_t> ProjShape(const std::string& proj, const Geometry& g) {
  if (proj == "k_proj" || proj == "v_proj") return {g.kv_dim(), g.d_model};
  if (proj == "out_proj") return {g.d_model, g.attn_dim()};
  return {g.attn_dim(), g.d_model};  // q_proj, gate_proj
}

// StrCat, not "[" + string: GCC 12 warns falsely (-Wrestrict) on that operator+ when inlined.
std::string Shape(const std::vector<uint32_t>& s) {
  return absl::StrCat("[", absl::StrJoin(s, ", "), "]");
}

absl::StatusOr<double> ScaleFromPeftConfig(const std::string& json, uint32_t rank,
                                           const std::string& file, std::string* source) {
  nlohmann::json c = nlohmann::json::parse(json, nullptr, false);
  if (c.is_discarded() || !c.is_object())
    return FileError(file, "adapter config is not a JSON object");
  if (!c.contains("lora_alpha") || !c["lora_alpha"].is_number())
    return FileError(file, "adapter config has no numeric 'lora_alpha'");
  const double alpha = c["lora_alpha"].get<double>();
  if (c.contains("r") && c["r"].is_number_unsigned() && c["r"].get<uint32_t>() != rank)
    return FileError(
        file, absl::StrFormat("adapter config r = %d but the adapter's matrices have rank %d",
                              c["r"].get<uint32_t>(), rank));
  const bool rslora =
      c.contains("use_rslora") && c["use_rslora"].is_boolean() && c["use_rslora"].get<bool>();
  *source = rslora ? "lora_alpha / sqrt(r) (adapter config, use_rslora)"
                   : "lora_alpha / r (adapter config)";
  return rslora ? alpha / std::sqrt(double(rank)) : alpha / double(rank);
}

// W + dW in float32, refused (naming the tensor) when any value is not finite: a huge scale
// overflows float32, and no writer may emit such a value.
absl::StatusOr<std::vector<float>> MergedWeight(const std::string& tensor,
                                                const std::vector<float>& w,
                                                const std::vector<float>& dw, double scale) {
  std::vector<float> merged(w.size());
  for (size_t k = 0; k < w.size(); ++k) {
    merged[k] = w[k] + dw[k];
    if (!std::isfinite(merged[k]))
      return absl::InvalidArgumentError(absl::StrFormat(
          "tensor '%s': the LoRA merge gives a non-finite value at element %d (update %g at "
          "scale %g); refusing to write it",
          tensor, k, dw[k], scale));
  }
  return merged;
}

// ||dW|| / ||W||, refused above `bound` (an all-zero W counts as infinitely exceeded).
absl::StatusOr<double> CheckUpdateSize(const std::string& tensor, const std::vector<float>& w,
                                       const std::vector<float>& dw, double scale, double bound) {
  double w2 = 0, d2 = 0;
  for (size_t k = 0; k < w.size(); ++k) {
    w2 += double(w[k]) * w[k];
    d2 += double(dw[k]) * dw[k];
  }
  const double ratio = w2 > 0 ? std::sqrt(d2 / w2)
                       : d2 > 0 ? std::numeric_limits<double>::infinity()
                                : 0.0;
  if (ratio > bound)
    return absl::InvalidArgumentError(absl::StrFormat(
        "tensor '%s': the LoRA update is far larger than the weight (|dW|/|W| = %.3g > %g at "
        "scale %g): a wrong --scale or adapter? --allow-large-update merges it anyway",
        tensor, ratio, bound, scale));
  return ratio;
}

}  // namespace

absl::StatusOr<LoraAdapter> ParseLoraAdapter(const Safetensors& st, const std::string& file,
                                             const std::string& adapter_config_json,
                                             std::optional<double> scale_override,
                                             const Geometry& g) {
  static const std::regex kPeft(
      R"((?:^|\.)layers\.(\d+)\.self_attn\.(q|k|v|gate|out)_proj\.lora_(A|B)(?:\.[A-Za-z0-9_]+)?\.weight$)");
  static const std::regex kStacked(R"((?:^|[./])(q|k|v|gate|out)_proj(?:[./]kernel)?[./](A|B)$)");
  LoraAdapter ad;
  struct Half {
    const FloatTensor* a = nullptr;
    const FloatTensor* b = nullptr;
  };
  std::map<std::pair<uint32_t, int>, Half> peft;  // (layer, proj) -> A, B
  std::map<int, Half> stacked;                    // proj -> A, B
  // std::regex recurses per character: bound the key before matching (real keys are < 200).
  constexpr size_t kMaxKeyLength = 512;
  for (const FloatTensor& t : st.tensors) {
    if (t.name.size() > kMaxKeyLength)
      return FileError(file, absl::StrFormat("key '%s...' is %d characters long (at most %d)",
                                             t.name.substr(0, 48), t.name.size(), kMaxKeyLength));
    std::smatch m;
    if (std::regex_search(t.name, m, kPeft)) {
      const std::string digits = m[1].str();
      if (digits.size() > 6)
        return FileError(file, "key '" + t.name + "': layer index out of range");
      const uint32_t layer = uint32_t(std::stoul(digits));
      Half& h = peft[{layer, ProjIndex(m[2].str() + "_proj")}];
      (m[3] == "A" ? h.a : h.b) = &t;
    } else if (std::regex_search(t.name, m, kStacked)) {
      Half& h = stacked[ProjIndex(m[1].str() + "_proj")];
      (m[2] == "A" ? h.a : h.b) = &t;
    } else {
      return FileError(file,
                       "key '" + t.name +
                           "' is not a LoRA weight of q/k/v/gate/out_proj (PEFT "
                           "'layers.N.self_attn.X_proj.lora_A.weight' or stacked 'X_proj.A')");
    }
  }
  if (!peft.empty() && !stacked.empty())
    return FileError(file, "the adapter mixes PEFT keys and stacked keys");
  if (peft.empty() && stacked.empty()) return FileError(file, "the adapter has no LoRA weights");

  uint32_t rank = 0;
  auto check_rank = [&](uint32_t r, const std::string& key) -> absl::Status {
    if (r == 0) return FileError(file, "key '" + key + "': rank 0");
    if (rank && r != rank)
      return FileError(file, absl::StrFormat("key '%s': rank %d differs from the adapter's rank %d",
                                             key, r, rank));
    rank = r;
    return absl::OkStatus();
  };

  if (!peft.empty()) {
    ad.layout = "peft";
    for (auto& [key, h] : peft) {
      const auto [layer, pi] = key;
      const std::string proj = Projections()[pi];
      const FloatTensor* any = h.a ? h.a : h.b;
      if (!h.a || !h.b)
        return FileError(
            file, "key '" + any->name + "' has no matching lora_" + (h.a ? "B" : "A") + " weight");
      if (layer >= g.num_layers)
        return FileError(file, absl::StrFormat("key '%s': layer %d but the model has %d layers",
                                               h.a->name, layer, g.num_layers));
      const auto [out, in] = ProjShape(proj, g);
      if (h.a->shape.size() != 2 || h.a->shape[1] != in)
        return FileError(file, absl::StrFormat("key '%s' has shape %s, expected [r, %d]", h.a->name,
                                               Shape(h.a->shape), in));
      CACT_RETURN_IF_ERROR(check_rank(h.a->shape[0], h.a->name));
      if (h.b->shape != std::vector<uint32_t>{out, rank})
        return FileError(file, absl::StrFormat("key '%s' has shape %s, expected [%d, %d]",
                                               h.b->name, Shape(h.b->shape), out, rank));
      LoraPair p{layer, proj, rank, in, out, h.a->data, h.b->data, h.a->name, h.b->name};
      ad.pairs.push_back(std::move(p));
    }
  } else {
    ad.layout = "stacked";
    for (auto& [pi, h] : stacked) {
      const std::string proj = Projections()[pi];
      const FloatTensor* any = h.a ? h.a : h.b;
      if (!h.a || !h.b)
        return FileError(
            file, "key '" + any->name + "' has no matching " + (h.a ? "B" : "A") + " weight");
      const auto [out, in] = ProjShape(proj, g);
      const uint32_t L = g.num_layers;
      if (h.a->shape.size() != 3 || h.a->shape[0] != L || h.a->shape[1] != in)
        return FileError(file, absl::StrFormat("key '%s' has shape %s, expected [%d, %d, r]",
                                               h.a->name, Shape(h.a->shape), L, in));
      CACT_RETURN_IF_ERROR(check_rank(h.a->shape[2], h.a->name));
      if (h.b->shape != std::vector<uint32_t>{L, rank, out})
        return FileError(file, absl::StrFormat("key '%s' has shape %s, expected [%d, %d, %d]",
                                               h.b->name, Shape(h.b->shape), L, rank, out));
      for (uint32_t l = 0; l < L; ++l) {
        // Flax [in, r] / [r, out] per layer -> PEFT [r, in] / [out, r].
        LoraPair p{l,
                   proj,
                   rank,
                   in,
                   out,
                   std::vector<float>(size_t(rank) * in),
                   std::vector<float>(size_t(out) * rank),
                   absl::StrCat(h.a->name, "[", l, "]"),
                   absl::StrCat(h.b->name, "[", l, "]")};
        const float* A = h.a->data.data() + size_t(l) * in * rank;
        const float* B = h.b->data.data() + size_t(l) * rank * out;
        for (uint32_t i = 0; i < in; ++i)
          for (uint32_t r = 0; r < rank; ++r) p.a[size_t(r) * in + i] = A[size_t(i) * rank + r];
        for (uint32_t r = 0; r < rank; ++r)
          for (uint32_t o = 0; o < out; ++o) p.b[size_t(o) * rank + r] = B[size_t(r) * out + o];
        ad.pairs.push_back(std::move(p));
      }
    }
    std::sort(ad.pairs.begin(), ad.pairs.end(), [](const LoraPair& x, const LoraPair& y) {
      return std::make_pair(x.layer, ProjIndex(x.proj)) <
             std::make_pair(y.layer, ProjIndex(y.proj));
    });
  }
  for (const LoraPair& p : ad.pairs)
    for (const std::vector<float>* v : {&p.a, &p.b})
      for (float x : *v)
        if (!std::isfinite(x))
          return FileError(file, "key '" + p.a_key + "' (or its B) has a non-finite value");

  if (scale_override) {
    ad.scale = *scale_override;
    ad.scale_source = "--scale";
  } else if (!adapter_config_json.empty()) {
    CACT_ASSIGN_OR_RETURN(ad.scale,
                          ScaleFromPeftConfig(adapter_config_json, rank, file, &ad.scale_source));
  } else if (auto it = st.metadata.find("scale"); it != st.metadata.end()) {
    char* end = nullptr;
    ad.scale = std::strtod(it->second.c_str(), &end);
    if (!end || *end || !std::isfinite(ad.scale))
      return FileError(file, "metadata scale '" + it->second + "' is not a number");
    ad.scale_source = "the adapter's 'scale'";
  } else {
    return FileError(
        file,
        "no LoRA scale: give the PEFT adapter config (lora_alpha, r) or an explicit scale, or put "
        "'scale' in the adapter's metadata");
  }
  if (!std::isfinite(ad.scale)) return FileError(file, "the LoRA scale is not finite");
  return ad;
}

absl::StatusOr<LoraAdapterFiles> FindLoraAdapterFiles(const std::string& adapter,
                                                      const std::string& adapter_config) {
  namespace fs = std::filesystem;
  constexpr const char* kWeights = "adapter_model.safetensors";
  constexpr const char* kConfig = "adapter_config.json";
  LoraAdapterFiles f;
  f.weights = adapter;
  std::error_code ec;
  if (fs::is_directory(adapter, ec)) {
    f.weights = (fs::path(adapter) / kWeights).string();
    if (!fs::exists(f.weights, ec))
      return FileError(adapter, absl::StrCat("is a directory without ", kWeights,
                                             " (a PEFT adapter directory holds ", kWeights,
                                             " and ", kConfig, ")"));
  }
  f.config = adapter_config;
  if (f.config.empty() && f.weights.ends_with(".safetensors")) {
    const fs::path beside = fs::path(f.weights).parent_path() / kConfig;
    if (fs::is_regular_file(beside, ec)) {
      f.config = beside.string();
      f.config_found = true;
    }
  }
  return f;
}

std::vector<float> LoraDelta(const LoraPair& p, double scale) {
  const float s = float(scale);
  std::vector<float> d(size_t(p.out) * p.in);
  std::vector<float> acc(p.in);
  for (uint32_t o = 0; o < p.out; ++o) {
    std::fill(acc.begin(), acc.end(), 0.0f);
    for (uint32_t r = 0; r < p.rank; ++r) {  // left to right over r, per element
      const float bor = p.b[size_t(o) * p.rank + r];
      const float* a = p.a.data() + size_t(r) * p.in;
      for (uint32_t i = 0; i < p.in; ++i) acc[i] += bor * a[i];
    }
    for (uint32_t i = 0; i < p.in; ++i) d[size_t(o) * p.in + i] = s * acc[i];
  }
  return d;
}

namespace {

// One adapted matrix: W + dW written over its deployed bytes (re-encoded), or quantized
// afresh by the exporter's rule (--exporter-rule, or a new width, which has no deployed
// bytes to re-encode over). The LoRA figures compare what the file moved with dW, so they
// are given only where the width stays.
absl::Status MergeOne(const CactFile& base, const TensorEntry& t, const LoraPair& p,
                      const std::vector<float>& dw, double scale, const LoraRequest& req,
                      uint32_t bits, bool rewidth, TensorOutcome* o, TensorBlob* blob) {
  const bool afresh = req.exporter_rule || rewidth;
  o->action = afresh ? TensorAction::kRequantized : TensorAction::kReencoded;
  o->reason = "LoRA merge (" + p.a_key + ")";
  CqShape shape{p.out, p.in, t.record.group, t.record.bits};
  if (rewidth) {
    shape = RetypeAsCq(t, bits, t.record.group, o, blob);
    absl::StrAppend(&o->reason, ", ", o->source, " -> ", o->target);
  } else if (req.exporter_rule) {
    o->reason += ", --exporter-rule";
  }
  CACT_ASSIGN_OR_RETURN(const std::vector<float> w, TensorValues(base, t));
  CACT_ASSIGN_OR_RETURN(const std::vector<float> merged, MergedWeight(t.name, w, dw, scale));
  CACT_ASSIGN_OR_RETURN(const double update_rel,
                        CheckUpdateSize(t.name, w, dw, scale, req.max_update_ratio));
  if (req.dry_run) return absl::OkStatus();
  const std::vector<float> cb = base.CodebookFor(shape.bits, shape.group);
  std::vector<float> written(w.size());
  if (afresh) {
    CqMatrix m = QuantizeMatrix(merged.data(), shape, cb, req.rotation);
    o->rel_mse = m.rel_mse();
    blob->bytes = PackBlob(m);
    DequantizeBlob(blob->bytes, shape, cb, written.data());
  } else {
    // Groups the update leaves unchanged keep their bytes; the others are refitted, so
    // what the file holds moves by the update and not by requantization noise.
    ReencodeOptions ro;
    ro.keep_tolerance = kKeepTolerance;
    ro.rotation = req.rotation;
    ReencodeResult r = ReencodeMatrix(base.blob(t), shape, cb, merged.data(), w.data(), ro);
    blob->bytes = std::move(r.blob);
    o->rel_mse = r.rel_mse;
    o->groups = GroupFiguresOf(r);
    written = std::move(r.values);
  }
  if (rewidth) return absl::OkStatus();
  double d2 = 0, dot = 0, moved = 0;
  for (size_t k = 0; k < w.size(); ++k) {
    const double m = double(written[k]) - w[k];
    d2 += double(dw[k]) * dw[k];
    dot += m * dw[k];
    moved += m * m;
  }
  LoraFigures f;
  f.layer = p.layer;
  f.rank = p.rank;
  f.update_rel = update_rel;
  f.survived = d2 > 0 ? std::sqrt(moved / d2) : 0.0;
  f.aligned = d2 > 0 ? dot / d2 : 0.0;
  o->lora = f;
  return absl::OkStatus();
}

}  // namespace

Scheme AdapterQat::scheme() const {
  if (bits_map) return *bits_map;
  Scheme s;
  s.default_bits = bits.value_or(0);
  return s;
}

std::string AdapterQat::source() const {
  return bits_map ? "the adapter's QAT metadata (qat_bits_map)"
                  : absl::StrCat("the adapter's QAT metadata (qat_bits ", bits.value_or(0), ")");
}

absl::StatusOr<AdapterQat> AdapterQatOf(const Safetensors& adapter, const std::string& file) {
  AdapterQat q;
  q.file = file;
  const auto& md = adapter.metadata;
  if (auto it = md.find("qat_bits"); it != md.end()) {
    uint32_t w = 0;
    if (!absl::SimpleAtoi(it->second, &w) || w < 2 || w > 4)
      return FileError(file, "metadata qat_bits '" + it->second + "' is not a width 2, 3 or 4");
    q.bits = w;
  }
  if (auto it = md.find("qat_bits_map"); it != md.end()) {
    absl::StatusOr<Scheme> s = ParseScheme(it->second);
    if (!s.ok())
      return FileError(file, "metadata qat_bits_map '" + it->second +
                                 "': " + std::string(s.status().message()));
    q.bits_map = *s;
  }
  if (q.bits && q.bits_map)
    return FileError(file, "metadata sets both qat_bits and qat_bits_map (finetune writes one)");
  return q;
}

absl::Status CheckSchemeAgainstQat(const AdapterQat& qat, const Scheme& explicit_scheme,
                                   const std::string& flag) {
  if (qat.bits_map)
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the adapter was trained for the checkpoint's mixed CQ bit map %s, but %s would "
        "deploy different numerics (leave it out: the build follows the adapter)",
        qat.file, qat.bits_map->ToString(), flag));
  if (qat.bits && explicit_scheme.ToString() != qat.scheme().ToString())
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: the adapter was trained for CQ W%d, but %s (%s) would deploy different numerics; "
        "rebuild at the adapter bit width",
        qat.file, *qat.bits, flag, explicit_scheme.ToString()));
  return absl::OkStatus();
}

absl::StatusOr<CactContents> MergeLora(const LoraRequest& req, RebuildReport* report,
                                       const TensorCallback& on_tensor) {
  const CactFile& base = *req.base;
  const LoraAdapter& ad = *req.adapter;
  std::map<std::string, const LoraPair*> by_name;
  for (const LoraPair& p : ad.pairs) by_name[absl::StrFormat("layer%02d.%s", p.layer, p.proj)] = &p;

  CactContents out;
  out.geometry = base.geometry();
  out.codebook.assign(base.codebook().begin(), base.codebook().end());
  const auto& tensors = base.tensors();
  if (req.scheme) {
    std::vector<std::string> matrices;
    for (const TensorEntry& t : tensors)
      if (t.kind == TensorKind::kMatrix) matrices.push_back(t.name);
    CACT_RETURN_IF_ERROR(CheckRulesMatch(*req.scheme, matrices));
  }
  report->scheme = req.scheme ? req.scheme->ToString() : InferScheme(base);
  report->scheme_source = req.scheme ? req.scheme_source : "base file widths";
  report->group = base.codebook_group();
  report->geometry_source = base.path();
  report->tokenizer_source = base.path() + " (bytes copied)";
  report->dry_run = req.dry_run;
  report->notes.push_back(absl::StrFormat(
      "adapter: %s layout, rank %d, scale %.6g (%s), %d projections", ad.layout,
      ad.pairs.empty() ? 0 : ad.pairs[0].rank, ad.scale, ad.scale_source, ad.pairs.size()));

  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorEntry& t = tensors[i];
    auto [o, blob] = CarryTensor(t);
    auto it = by_name.find(t.name);
    // The width this matrix is deployed at, and whether that changes it.
    const bool matrix = t.kind == TensorKind::kMatrix;
    const uint32_t bits = req.scheme && matrix ? req.scheme->BitsFor(t.name) : t.record.bits;
    const bool rewidth = req.scheme && matrix && !(t.is_cq() && t.record.bits == bits);
    if (it == by_name.end() && rewidth) {
      CACT_RETURN_IF_ERROR(RequantizeTensor(base, t, bits, report->group ? report->group : 128,
                                            req.rotation, req.dry_run, &o, &blob));
    } else if (it == by_name.end()) {
      CopyBlobBytes(base, t, &blob);
      o.action = TensorAction::kCopied;
      o.reason = "not in the adapter";
    } else {
      const LoraPair& p = *it->second;
      if (!t.is_cq() || t.rows() != p.out || t.cols() != p.in)
        return FileError(base.path(), "tensor '" + t.name + "' is not the CQ [" +
                                          std::to_string(p.out) + ", " + std::to_string(p.in) +
                                          "] matrix the adapter expects");
      const std::vector<float> dw = LoraDelta(p, ad.scale);
      const bool zero = std::all_of(dw.begin(), dw.end(), [](float v) { return v == 0.0f; });
      if (zero && rewidth) {
        CACT_RETURN_IF_ERROR(RequantizeTensor(base, t, bits, t.record.group, req.rotation,
                                              req.dry_run, &o, &blob));
      } else if (zero) {
        // B @ A is exactly zero (e.g. a stacked adapter's untrained layers): nothing to merge,
        // and requantizing W would change bytes the adapter never asked to change.
        CopyBlobBytes(base, t, &blob);
        o.action = TensorAction::kCopied;
        o.reason = "the adapter's update is exactly zero";
      } else {
        CACT_RETURN_IF_ERROR(MergeOne(base, t, p, dw, ad.scale, req, bits, rewidth, &o, &blob));
      }
    }
    o.bytes = blob.record.nbytes;
    report->tensors.push_back(o);
    out.tensors.push_back(std::move(blob));
    if (on_tensor) on_tensor(i + 1, tensors.size(), report->tensors.back());
  }
  size_t weak = 0;
  for (const TensorOutcome& t : report->tensors)
    if (t.lora && t.lora->aligned < 0.5) ++weak;
  if (weak)
    report->notes.push_back(absl::StrFormat(
        "%d of %d merged tensors kept less than half of their update along its direction (aligned "
        "< 0.5): the "
        "update is small against the quantization step; the tuned model may behave like the base",
        weak, report->Count(TensorAction::kReencoded) + report->Count(TensorAction::kRequantized)));
  return out;
}

}  // namespace cact
