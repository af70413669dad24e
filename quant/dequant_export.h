// A .cact's tensors as float weights: the interchange safetensors (canonical names,
// [out, in], official config JSON and bits_map in __metadata__, like the fixtures'
// weights.safetensors). Edit or fine-tune them, then `cact-quant build --base` the
// original: unchanged tensors keep their bytes.
#pragma once
#include "absl/status/statusor.h"
#include "formats/cact/cact_file.h"
#include "formats/safetensors.h"

namespace cact {

// Every non-RAW tensor dequantized exactly as the official reader does (DequantizeBlob).
absl::StatusOr<Safetensors> DequantizedWeights(const CactFile& file);

}  // namespace cact
