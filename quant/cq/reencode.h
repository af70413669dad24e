// Writing an edited CQ matrix back over the blob it was deployed as, group by group.
//
// Quantizing dequantized values again is not the identity: a codebook vector is not of unit
// length (about 0.94 for 2 bits), so the exporter's rule (norm = |w|, codes = nearest entry of
// w/|w|) keeps the codes and shrinks the norm, and every group of a touched tensor moves by
// percents. Here a group whose values are the base's dequantization keeps its code and norm
// bytes; a changed group is re-encoded by a fit that is a fixed point on unchanged groups:
//   - codes and norm alternate: codes = nearest entries of r / n, n = <r, cb[codes]> /
//     |cb[codes]|^2 (least squares, then FP16), r the rotated group; two starts, the base's
//     norm and the exporter's codes; the one closer to r wins (the base's on a tie). A
//     dequantized group r = n0 cb[c0] gives back c0 and n0 from the first start.
//   - a row's padding columns are free: they start at the base's dequantized padding (and
//     at zero) and take what the fit puts there, refitted while the real columns' error falls;
//   - the exporter's own encoding of the edited values is the last candidate: judged on the
//     real columns, the result is never further from the edit than the exporter's rule.
#pragma once
#include <cstdint>
#include <span>
#include <vector>

#include "quant/cq/cq.h"

namespace cact {

struct ReencodeOptions {
  // A group is unchanged, and keeps its bytes, when max |edited - base| over its columns is
  // <= keep_tolerance x max |base| over the tensor (the callers pass selective.h's
  // kKeepTolerance); negative: no group is (every group is refitted).
  double keep_tolerance = 4e-6;
  // A changed group that holds new values rather than an edit of the deployed ones is
  // quantized by the exporter's rule: values the rule maps onto the base's own bytes (the
  // float weights the base was built from), or further from the base than half the rule's
  // typical relative error at this width (0.17 of the group's norm at 2 bits, 0.05 at 4).
  // So a file's own float weights give back the exporter's bytes (build --base, import).
  bool quantize_far_groups = false;
  // The rotation of the exporter's rule (QuantizeMatrix). The fit itself rotates with the
  // FWHT: the orders differ by float32 rounding (~1e-7 relative), far below a code step or
  // an FP16 norm step.
  CqRotation rotation = CqRotation::kFwht;
};

struct ReencodeResult {
  std::vector<uint8_t> blob;
  std::vector<float> values;  // the result dequantized (DequantizeBlob), [out, in]
  uint64_t kept = 0, reencoded = 0, quantized = 0;  // groups
  double base_norm = 0;   // |base|
  double edit_norm = 0;   // |edited - base|
  double moved_norm = 0;  // |result - base|
  double error_norm = 0;  // |result - edited|
  double rel_mse = 0;     // |result - edited|^2 / |edited|^2
  // |result - base| / |edit|: ~1 when the edit reached the file as made, 0 when lost.
  double survived() const { return edit_norm > 0 ? moved_norm / edit_norm : 0.0; }
};

// `base_blob` is the deployed blob of `shape` (caller checked its size), `codebook` the
// values a reader uses for it, `base_values` its DequantizeBlob output and `edited` the new
// values, both [out, in]. OpenMP over rows.
ReencodeResult ReencodeMatrix(std::span<const uint8_t> base_blob, const CqShape& shape,
                              std::span<const float> codebook, const float* edited,
                              const float* base_values, const ReencodeOptions& options);

}  // namespace cact
