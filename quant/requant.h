// cact-quant requant: change the CQ widths of an existing .cact. Records whose width does
// not change are copied byte for byte; the others are requantized from their dequantized
// values (the original float weights are gone: the report says so).
#pragma once
#include "absl/status/statusor.h"
#include "quant/build.h"

namespace cact {

struct RequantRequest {
  const CactFile* input = nullptr;
  Scheme scheme;
  uint32_t kv_window = 0;  // 0 = keep the input's
  CqRotation rotation = CqRotation::kFwht;
  bool dry_run = false;
};

// Gives a matrix carried from an input (CarryTensor) the CQ record of `bits` (its group kept;
// a matrix that is not CQ takes `group`) and returns the shape of its new blob.
CqShape RetypeAsCq(const TensorEntry& t, uint32_t bits, uint32_t group, TensorOutcome* o,
                   TensorBlob* blob);

// The same, then the bytes: `t`'s dequantized values quantized by the exporter's rule (none
// under dry_run). The outcome says requantized, from which values.
absl::Status RequantizeTensor(const CactFile& in, const TensorEntry& t, uint32_t bits,
                              uint32_t group, CqRotation rotation, bool dry_run,
                              TensorOutcome* o, TensorBlob* blob);

absl::StatusOr<CactContents> RequantCact(const RequantRequest& request, RebuildReport* report,
                                         const TensorCallback& on_tensor = nullptr);

}  // namespace cact
