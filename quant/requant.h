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

absl::StatusOr<CactContents> RequantCact(const RequantRequest& request, RebuildReport* report,
                                         const TensorCallback& on_tensor = nullptr);

}  // namespace cact
