// What differs between two .cact files: header fields, and per tensor whether the blob is
// identical, and if not, code agreement and the max |difference| of dequantized values.
#pragma once
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/cact_file.h"

namespace cact {

struct HeaderFieldDiff {
  std::string field;
  std::string a, b;
};

struct TensorDiff {
  std::string name;
  enum class Status { kIdentical, kChanged, kOnlyInA, kOnlyInB } status = Status::kIdentical;
  std::string a_type, b_type;   // "CQ2 g128", "FP16", ...
  double code_agreement = 1.0;  // fraction of equal CQ codes (same width and shape only)
  double norm_agreement = 1.0;  // fraction of equal FP16 group norms
  double max_abs_diff = 0.0;    // of dequantized values (same logical shape only); NaN when
                                // any value of either is not finite
  uint64_t non_finite = 0;      // elements where A or B is NaN or infinite
  double max_abs_a = 0.0;       // max |value| in A, for scale
  bool comparable = true;       // false when shapes differ
};

struct CactDiff {
  std::vector<HeaderFieldDiff> header;
  bool codebook_identical = true;
  std::vector<TensorDiff> tensors;
  int changed() const;
  bool identical() const;  // header, codebook and every blob
};

absl::StatusOr<CactDiff> DiffFiles(const CactFile& a, const CactFile& b);

}  // namespace cact
