// Selective requantization: a tensor keeps the base file's bytes when the float values
// given for it are the base's own dequantized values. Quantization is not idempotent
// (requantizing a dequantized tensor moves norms and codes), so this is the only way an
// unedited round trip (dump -> build --base) gives back the same file.
//
// "Equal" has to survive another implementation's dequantization: numpy, PyTorch or an
// FWHT reader sum the 128-term rotation in another order than ours and land a few float32
// ulps away (measured on the fixtures: up to 1.1e-6 of the tensor's max |value| between
// the exporter's order and the FWHT). The default tolerance is therefore
// max |value - base| <= kKeepTolerance * max |base|, four times that spread and far below
// any real edit (2-bit quantization moves values by ~30% of their scale); KeepPolicy::kExact
// demands bitwise equality instead.
#pragma once
#include <span>
#include <string>

namespace cact {

enum class KeepPolicy { kTolerance, kExact, kNever };
inline constexpr double kKeepTolerance = 4e-6;

struct KeepDecision {
  bool keep = false;
  double max_abs_diff = 0;  // max |value - base|
  double max_abs_base = 0;  // max |base|
  std::string reason;       // e.g. "= base (max |d| 2.9e-08 <= 4e-06 x 0.18)"
};

// `values` and `base` have the same length (the caller checked shapes).
KeepDecision DecideKeep(std::span<const float> values, std::span<const float> base,
                        KeepPolicy policy, double tolerance = kKeepTolerance);

}  // namespace cact
