// Writes a .cact: header and codebook from the geometry, directory, blobs in canonical
// order at 64-byte alignment with zero padding. Atomic (temp file + rename); a path ending
// in ".zst" is written zstd-compressed.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "formats/cact/header.h"

namespace cact {

struct TensorBlob {
  std::string name;            // canonical (used for error messages and checks)
  TensorRecord record;         // dtype, ndim, shape, group, bits; offset/nbytes are filled in
  std::vector<uint8_t> bytes;  // the blob
};

struct CactContents {
  Geometry geometry;
  std::vector<float> codebook;      // codebook_len values (CQ2 | CQ3 | CQ4)
  std::vector<TensorBlob> tensors;  // in directory order, tokenizer last
};

// Fills offset (from FirstBlobOffset, each aligned to 64) of records in directory order,
// keeping their nbytes; returns the file size. Usable on a layout without weights.
uint64_t AssignOffsets(std::vector<TensorRecord>* records, uint32_t codebook_len);

// Lays out offsets and produces the file bytes. The bytes are always validated by parsing
// them back with CactFile::FromBytes (errors name `name`); a tensor whose `name` is set
// must sit at the position of that canonical name.
absl::StatusOr<std::vector<uint8_t>> SerializeCact(const CactContents& c);
absl::StatusOr<std::vector<uint8_t>> SerializeCact(const CactContents& c, const std::string& name);
absl::Status WriteCact(const std::string& path, const CactContents& c, int zstd_level = 19);

}  // namespace cact
