#include "train/peft_adapter.h"

#include <cmath>
#include <filesystem>
#include <set>

#include "absl/strings/str_cat.h"
#include "formats/safetensors.h"
#include "lib/atomic_file.h"
#include "lib/status.h"
#include "nlohmann/json.hpp"

namespace cact::train {
namespace {

bool IsProjection(const std::string& p) {
  return p == "q_proj" || p == "k_proj" || p == "v_proj" || p == "gate_proj" || p == "out_proj";
}

absl::Status Validate(const std::string& dir, const PeftAdapter& ad) {
  if (ad.rank == 0) return FileError(dir, "LoRA rank must be at least 1");
  if (!std::isfinite(ad.alpha)) return FileError(dir, "lora_alpha is not finite");
  if (ad.pairs.empty()) return FileError(dir, "the adapter has no LoRA pairs");
  std::set<std::pair<uint32_t, std::string>> seen;
  for (const PeftLoraPair& p : ad.pairs) {
    const std::string what = absl::StrCat("layer ", p.layer, " ", p.proj);
    if (!IsProjection(p.proj))
      return FileError(dir, what + ": not one of q_proj, k_proj, v_proj, gate_proj, out_proj");
    if (!seen.insert({p.layer, p.proj}).second) return FileError(dir, what + ": given twice");
    if (p.in == 0 || p.out == 0) return FileError(dir, what + ": zero in/out size");
    if (p.a.size() != size_t(ad.rank) * p.in || p.b.size() != size_t(p.out) * ad.rank)
      return FileError(
          dir, absl::StrCat(what, ": A has ", p.a.size(), " values, B ", p.b.size(), "; rank ",
                            ad.rank, " x in ", p.in, " and out ", p.out, " x rank expected"));
    for (const std::vector<float>* v : {&p.a, &p.b})
      for (float x : *v)
        if (!std::isfinite(x)) return FileError(dir, what + ": a non-finite value");
  }
  return absl::OkStatus();
}

std::vector<std::string> TargetModules(const PeftAdapter& ad) {
  if (!ad.target_modules.empty()) return ad.target_modules;
  std::vector<std::string> out;
  for (const PeftLoraPair& p : ad.pairs)
    if (std::find(out.begin(), out.end(), p.proj) == out.end()) out.push_back(p.proj);
  return out;
}

}  // namespace

std::string PeftConfigJson(const PeftAdapter& ad) {
  nlohmann::ordered_json c;
  c["peft_type"] = "LORA";
  c["task_type"] = "CAUSAL_LM";
  c["base_model_name_or_path"] = ad.base_model;
  c["r"] = ad.rank;
  c["lora_alpha"] = ad.alpha;
  c["lora_dropout"] = 0.0;
  c["target_modules"] = TargetModules(ad);
  c["bias"] = "none";
  c["fan_in_fan_out"] = false;
  c["use_rslora"] = false;
  c["inference_mode"] = true;
  return c.dump(2) + "\n";
}

absl::Status WritePeftAdapter(const std::string& dir, const PeftAdapter& ad) {
  CACT_RETURN_IF_ERROR(Validate(dir, ad));
  Safetensors st;
  st.metadata = ad.metadata;
  st.metadata["format"] = "pt";
  for (const PeftLoraPair& p : ad.pairs) {
    const std::string key = absl::StrCat(ad.key_prefix, "layers.", p.layer, ".self_attn.", p.proj);
    st.tensors.push_back({key + ".lora_A.weight", {ad.rank, p.in}, p.a, "F32"});
    st.tensors.push_back({key + ".lora_B.weight", {p.out, ad.rank}, p.b, "F32"});
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return FileError(dir, "cannot create the adapter directory: " + ec.message());
  const std::string weights = dir + "/" + kPeftWeightsFile;
  CACT_RETURN_IF_ERROR(WriteSafetensors(weights, st));
  const std::string config = PeftConfigJson(ad);
  const absl::Status written =
      WriteFileAtomic(dir + "/" + kPeftConfigFile,
                      std::span(reinterpret_cast<const uint8_t*>(config.data()), config.size()));
  if (!written.ok()) std::filesystem::remove(weights, ec);
  return written;
}

}  // namespace cact::train
