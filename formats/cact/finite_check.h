// Finite or refused: every float a .cact file stores (the codebook, FP16/FP32 tensors, the
// FP16 norm of every CQ group) must be finite. A non-finite value is located by record,
// tensor, element or group, and byte offset, so a user can find it with a hex editor.
#pragma once
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "formats/cact/cact_file.h"

namespace cact {

struct NonFiniteValue {
  int64_t record = -1;   // directory index; -1 for the header codebook
  std::string tensor;    // canonical name, or "codebook"
  bool group_norm = false;  // CQ: `index` is a group (its FP16 norm), else an element
  uint64_t index = 0;
  uint64_t byte_offset = 0;  // in the (decompressed) file
  std::string value;         // "NaN", "+Inf", "-Inf"
  std::string Describe() const;  // "tensor 'x' (record 5) element 17 at byte 1234 is NaN"
};

// Every non-finite value in file order, at most `limit` of them; `*total` (optional) counts
// all of them. Reads every float once: ~0.7 M values for Needle 2.
std::vector<NonFiniteValue> FindNonFinite(const CactFile& file, size_t limit,
                                          uint64_t* total = nullptr);

// OK when every value is finite; else InvalidArgument naming the file and the first value.
absl::Status CheckFinite(const CactFile& file);

}  // namespace cact
