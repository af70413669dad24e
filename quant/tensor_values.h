// Float values of any record of a CactFile: CQ dequantized with the file's own codebook
// (rescaled for the record's group), FP16 decoded, FP32 copied. RAW has no values.
#pragma once
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/cact_file.h"
#include "quant/cq/cq.h"

namespace cact {

absl::StatusOr<std::vector<float>> TensorValues(const CactFile& file, const TensorEntry& t);
// The CQ shape of a CQ record ([rows, cols] with cols = product of the trailing dims).
CqShape CqShapeOf(const TensorEntry& t);

}  // namespace cact
