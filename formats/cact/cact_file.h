// A validated, read-only view of a .cact file (mmap'd, or decompressed from .cact.zst).
// Open() validates everything before returning; afterwards every accessor is safe.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/header.h"
#include "formats/needle/tensor_table.h"
#include "lib/file_bytes.h"

namespace cact {

struct TensorEntry {
  uint32_t index = 0;
  std::string name;  // canonical name from the position
  TensorKind kind = TensorKind::kVector;
  TensorRecord record;
  std::vector<uint32_t> shape() const;  // record.shape[0..ndim)
  bool is_cq() const { return record.dtype == DType::kCQ; }
  // Matrix view: rows = shape[0], cols = product of the rest (1-D: rows=1).
  uint64_t rows() const;
  uint64_t cols() const;
};

class CactFile {
 public:
  // Maps (or decompresses) and validates. Errors name file, field and byte offset.
  static absl::StatusOr<CactFile> Open(const std::string& path);
  static absl::StatusOr<CactFile> FromBytes(FileBytes bytes);

  const std::string& path() const { return bytes_.path(); }
  // 2; 3 only for Cact3File::records() (Open refuses a Needle 3 file: generation.h).
  int generation() const { return generation_; }
  const FileBytes& bytes() const { return bytes_; }
  const Header& header() const { return header_; }
  const Geometry& geometry() const { return header_.geometry; }
  // The stored codebook, all `codebook_len` values.
  std::span<const float> codebook() const { return codebook_; }
  // Codebook for a width: bits 2, 3, 4 from the file; 5 (ternary) analytic for `group`.
  // For a record group different from the header's inferred group, values are rescaled by
  // sqrt(header_group / group).
  std::vector<float> CodebookFor(uint32_t bits, uint32_t group) const;
  // Group the stored codebooks were scaled for (inferred from the CQ2 values), 0 if unknown.
  uint32_t codebook_group() const { return codebook_group_; }

  const std::vector<TensorEntry>& tensors() const { return tensors_; }
  const std::vector<ProbeHeadSpec>& probe_heads() const { return heads_; }
  const TensorEntry* Find(std::string_view name) const;
  std::span<const uint8_t> blob(const TensorEntry& t) const;
  std::span<const uint8_t> tokenizer_blob() const;  // the RAW record's bytes

 private:
  friend class Cact3File;  // builds the generation-neutral view of a Needle 3 file
  int generation_ = 2;
  FileBytes bytes_;
  Header header_;
  std::vector<float> codebook_;
  uint32_t codebook_group_ = 0;
  std::vector<TensorEntry> tensors_;
  std::vector<ProbeHeadSpec> heads_;
};

}  // namespace cact
