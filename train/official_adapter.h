// A PEFT-layout adapter (what `cact-torch finetune` trains) in the official trainer's layout:
// per projection one stacked A [L, in, r] and B [L, r, out] (the transposes of PEFT's A [r, in]
// and B [out, r]) under "stack/layers/block/self_attn/<proj>/kernel", scale alpha / r, so the
// official `needle build CKPT --lora ADAPTER.pkl` and `cact-quant lora` read it.
#pragma once
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "quant/import/flax_adapter_writer.h"
#include "train/peft_adapter.h"

namespace cact::train {

// What the official pickle records beside the arrays.
struct OfficialAdapterInfo {
  std::string base;                         // the checkpoint / file trained on
  std::optional<int64_t> qat_bits;          // the QAT width trained through, or None
  std::optional<std::string> qat_bits_map;  // or the bits map, or None
  int64_t seed = 0;
};

// Every projection of `adapter` must cover the same layers 0..L-1 (the stacked layout has no
// gaps); errors name the projection.
absl::StatusOr<FlaxAdapterToWrite> OfficialAdapterLayout(const PeftAdapter& adapter,
                                                         const OfficialAdapterInfo& info);

// OfficialAdapterLayout written as the official pickle, atomically, to `path`.
absl::Status WriteOfficialAdapter(const std::string& path, const PeftAdapter& adapter,
                                  const OfficialAdapterInfo& info);

}  // namespace cact::train
