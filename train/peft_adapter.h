// Writes a LoRA adapter as a PEFT adapter directory (adapter_model.safetensors +
// adapter_config.json), the layout `cact-quant lora --adapter ... --adapter-config ...`
// and HF PEFT read: keys "<prefix>layers.N.self_attn.X_proj.lora_{A,B}.weight", A [r, in]
// and B [out, r] float32 (torch orientation), merge scale lora_alpha / r.
#pragma once
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace cact::train {

struct PeftLoraPair {
  uint32_t layer = 0;
  std::string proj;  // "q_proj", "k_proj", "v_proj", "gate_proj" or "out_proj"
  uint32_t in = 0, out = 0;
  std::vector<float> a;  // [rank, in], row-major
  std::vector<float> b;  // [out, rank], row-major
};

struct PeftAdapter {
  uint32_t rank = 0;
  double alpha = 0;                         // lora_alpha
  std::vector<std::string> target_modules;  // empty: the projections of `pairs`, in order
  std::string base_model;                   // base_model_name_or_path
  std::string key_prefix = "base_model.model.model.";
  // Extra safetensors metadata (e.g. the QAT metadata "qat_bits" / "qat_bits_map" and "seed",
  // which `cact-quant lora` follows as `needle build` follows the official pickle's).
  std::map<std::string, std::string> metadata;
  std::vector<PeftLoraPair> pairs;
};

inline constexpr const char* kPeftWeightsFile = "adapter_model.safetensors";
inline constexpr const char* kPeftConfigFile = "adapter_config.json";

// The adapter_config.json text (PEFT fields: peft_type LORA, r, lora_alpha, target_modules,
// lora_dropout 0, bias none, task_type CAUSAL_LM, base_model_name_or_path, fan_in_fan_out
// false, use_rslora false).
std::string PeftConfigJson(const PeftAdapter& adapter);

// Validates everything first (rank, projection names, sizes, duplicates, finite values), so a
// bad adapter writes nothing; creates `dir` if missing; writes each file to a temporary and
// renames it into place. If the config cannot be written the weights just written are
// removed again, so the directory never holds one file of the pair from this call.
absl::Status WritePeftAdapter(const std::string& dir, const PeftAdapter& adapter);

}  // namespace cact::train
