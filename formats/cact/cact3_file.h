// A validated, read-only view of a generation-3 (Needle 3) .cact file: the 196-byte header,
// the geometry, the canonical name of every record, the heads, the codebooks and the blobs.
// Reading only: nothing in this version runs, rebuilds or converts generation 3
// (docs/engine.md "Needle 3: what running it would need").
#pragma once
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/cact_file.h"
#include "formats/cact/header3.h"
#include "formats/needle/tensor_table3.h"
#include "lib/file_bytes.h"

namespace cact {

class Cact3File {
 public:
  // Maps (or decompresses) and validates everything before returning. Errors name the file,
  // the field and its byte offset.
  static absl::StatusOr<Cact3File> Open(const std::string& path);
  static absl::StatusOr<Cact3File> FromBytes(FileBytes bytes);

  const Header3& header() const { return header_; }
  const Geometry3& geometry() const { return header_.geometry; }
  // What the records say beyond the header: gate and Monarch factor layouts, the heads.
  const Layout3Options& layout() const { return layout_; }
  const std::vector<ProbeHead3Spec>& probe_heads() const { return layout_.heads; }

  // The generation-neutral part, for the code that reads any .cact the same way (accounting,
  // the finite check, tensor values, the record diff, scheme inference): bytes, codebooks,
  // the named records and their blobs. Its generation() is 3 and its header().geometry is
  // all zero; the Needle 3 geometry is geometry() above.
  const CactFile& records() const { return file_; }

  const std::string& path() const { return file_.path(); }
  const std::vector<TensorEntry>& tensors() const { return file_.tensors(); }
  const TensorEntry* Find(std::string_view name) const { return file_.Find(name); }
  std::span<const uint8_t> blob(const TensorEntry& t) const { return file_.blob(t); }

 private:
  CactFile file_;
  Header3 header_;
  Layout3Options layout_;
};

}  // namespace cact
