// cact-quant lora: merge a LoRA adapter into the five attention projections of a .cact,
// in the FP32 domain of the base's dequantized weights, and re-encode only those tensors
// at their base width; every other tensor keeps its bytes (unless a scheme, the adapter's
// QAT metadata or --scheme, changes widths).
//
// Adapter layouts (both float safetensors):
//  - PEFT: `...layers.N.self_attn.{q,k,v,gate,out}_proj.lora_A.weight` [r, in] and
//    `...lora_B.weight` [out, r] (torch orientation; a ".default" adapter name is allowed
//    before ".weight"). Scale from adapter_config.json: lora_alpha / r, or
//    lora_alpha / sqrt(r) with use_rslora.
//  - Stacked (the Flax training layout): per projection one `{q,k,v,gate,out}_proj.A`
//    [L, in, r] and `..._proj.B` [L, r, out] (a "/kernel" or ".kernel" step before A/B is
//    allowed, e.g. "stack/layers/block/self_attn/q_proj/kernel/A"); the scale is the
//    metadata entry "scale".
//  `--scale` overrides either.
// Merge, per element, in float32: dW[o][i] = scale * sum_r (B[o][r] * A[r][i]) with the
// sum taken left to right over r (numpy/PEFT's `W + scale * (B @ A)` on the reference
// BLAS), then W + dW.
#pragma once
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "quant/build.h"

namespace cact {

struct LoraPair {
  uint32_t layer = 0;
  std::string proj;  // "q_proj", "k_proj", "v_proj", "gate_proj", "out_proj"
  uint32_t rank = 0, in = 0, out = 0;
  std::vector<float> a;      // [rank, in]  (PEFT orientation)
  std::vector<float> b;      // [out, rank]
  std::string a_key, b_key;  // where they came from, for messages
};

struct LoraAdapter {
  std::string layout;  // "peft" or "stacked"
  double scale = 0;
  std::string scale_source;  // "lora_alpha / r (adapter_config.json)", "--scale", "metadata scale"
  std::vector<LoraPair> pairs;  // sorted by layer, then q, k, v, gate, out
};

// Parses and validates an adapter against the base geometry: every key must be a LoRA
// weight of one of the five projections, shapes must fit, layer indices must exist, A and
// B must come in pairs with one rank. Errors name the key.
absl::StatusOr<LoraAdapter> ParseLoraAdapter(const Safetensors& adapter, const std::string& file,
                                             const std::string& adapter_config_json,
                                             std::optional<double> scale_override,
                                             const Geometry& g);

// Where an adapter's files are, as PEFT users hand them over. `adapter` is the weights file
// or a directory holding adapter_model.safetensors. The config is `adapter_config` when
// given, else the adapter_config.json beside safetensors weights when there is one, else "".
// Only looks at the file system; reads nothing.
struct LoraAdapterFiles {
  std::string weights, config;
  bool config_found = false;  // the config was found beside the weights, not given
};
absl::StatusOr<LoraAdapterFiles> FindLoraAdapterFiles(const std::string& adapter,
                                                      const std::string& adapter_config);

// dW for one pair, [out, in] row-major, exactly as documented above.
std::vector<float> LoraDelta(const LoraPair& p, double scale);

// The largest ||dW|| / ||W|| (Frobenius norms, per merged tensor) merged without being asked
// to. Fine-tunes move a weight by a few percent (the worked example in docs/cact-quant.md:
// 0.05); an update ten times the weight leaves less than a tenth of it in the result, which
// is a wrong --scale or adapter far more often than a wish. The tests' deliberately large
// merges reach 5.6.
inline constexpr double kMaxLoraUpdateRatio = 10.0;

// The numerics a quantization-aware fine-tune trained through, as its adapter records them
// (official finetune since v2.0.12; a stacked or PEFT adapter's metadata "qat_bits_map", the
// checkpoint's bits map, or "qat_bits", one width). `needle build` deploys them.
struct AdapterQat {
  std::optional<uint32_t> bits;
  std::optional<Scheme> bits_map;
  std::string file;  // the adapter, for messages
  bool recorded() const { return bits || bits_map; }
  Scheme scheme() const;       // what they deploy: the bits map, else default=<bits>
  std::string source() const;  // "the adapter's QAT metadata (qat_bits 4)" / "(qat_bits_map)"
};
// From an adapter's metadata; a width other than 2-4, a map ParseScheme refuses, or both set
// is an error naming the key.
absl::StatusOr<AdapterQat> AdapterQatOf(const Safetensors& adapter, const std::string& file);
// `needle build`'s rule for an explicit scheme beside a QAT adapter (`flag` names it): with
// the adapter's bits map any explicit scheme is refused; with its width, any scheme other
// than that uniform width. OK when the adapter recorded neither.
absl::Status CheckSchemeAgainstQat(const AdapterQat& qat, const Scheme& explicit_scheme,
                                   const std::string& flag);

struct LoraRequest {
  const CactFile* base = nullptr;
  const LoraAdapter* adapter = nullptr;
  // The widths to deploy (nullopt: the base's). A matrix whose width changes is quantized
  // afresh at the new width: an adapted one from W + dW, the others from their dequantized
  // values, as requant does.
  std::optional<Scheme> scheme;
  std::string scheme_source;  // for the report
  // A tensor whose update exceeds this ratio is refused, naming it (infinity: no bound).
  // Non-finite merged values are refused always.
  double max_update_ratio = kMaxLoraUpdateRatio;
  // Quantize merged tensors afresh by the exporter's rule (the official path: merge into the
  // float weights, then build) instead of re-encoding them over the base's bytes.
  bool exporter_rule = false;
  CqRotation rotation = CqRotation::kFwht;
  bool dry_run = false;
};

absl::StatusOr<CactContents> MergeLora(const LoraRequest& request, RebuildReport* report,
                                       const TensorCallback& on_tensor = nullptr);

}  // namespace cact
