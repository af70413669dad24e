// Bounds of tensors read from a TorchScript archive. libtorch 1.13 sizes a storage read from
// an archive by the element count its pickle claims and fills it from the data record,
// whatever the record's size: in a damaged archive storage().nbytes() can exceed the memory
// behind it (found by fuzz_torch_import: a 32-byte tensor on a 28-byte record; reading it
// went past the record). While a RecordSizeScope is open, the CPU allocator (through which
// the archive's records are allocated) remembers the true size of each allocation, and
// CheckTensorInRecord holds a tensor to it.
#pragma once
#include <ATen/core/Tensor.h>

#include <string>

#include "absl/status/status.h"

namespace cact::torchscript {

class RecordSizeScope {
 public:
  RecordSizeScope();
  ~RecordSizeScope();
  RecordSizeScope(const RecordSizeScope&) = delete;
  RecordSizeScope& operator=(const RecordSizeScope&) = delete;
};

// The tensor lies inside the memory really behind its storage (allocated while a scope was
// open) and holds no more elements than that memory has bytes (stride-0 sizes could
// otherwise claim anything), which also bounds what converting it allocates by the file
// size. `name` and `path` go into the error.
absl::Status CheckTensorInRecord(const at::Tensor& t, const std::string& name,
                                 const std::string& path);

}  // namespace cact::torchscript
