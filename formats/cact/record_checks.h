// The checks of a .cact directory that both generations make alike: the codebook values,
// reading the records, one record against its canonical spec (dtype for its kind, its own
// fields, shape), the tokenizer, and that the blobs neither overlap nor leave bytes after the
// last one.
// The generation-2 (cact_file.cc) and generation-3 (cact3_file.cc) validators call them.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "formats/cact/header.h"
#include "formats/needle/tensor_table.h"

namespace cact {

// Byte positions of the fields inside one 44-byte record ('<BBHIIIIQQII').
inline constexpr uint64_t kRecDType = 0, kRecNdim = 1, kRecPad = 2, kRecShape = 4, kRecOffset = 20,
                          kRecNbytes = 28, kRecGroup = 36, kRecBits = 40;

// Where a directory lies in its file: after a header of `header_bytes` and the codebook.
struct DirectoryView {
  const std::string& file;
  std::span<const uint8_t> bytes;
  uint64_t header_bytes = 0;
  uint32_t codebook_len = 0;
  uint32_t num_tensors = 0;

  uint64_t RecordPos(uint32_t i) const {
    return header_bytes + 4ull * codebook_len + kRecordBytes * uint64_t(i);
  }
  uint64_t FirstBlob() const { return AlignUp(RecordPos(num_tensors), kBlobAlign); }
  // "FILE: record I (NAME) FIELD at offset N: WHAT", N the field's byte in the file.
  absl::Status RecordError(uint32_t i, const std::string& name, const char* field,
                           uint64_t field_pos, const std::string& what) const;
};

// "[8,16]" for the first ndim dims of a record.
std::string RecordShapeText(const TensorRecord& r);

// The `codebook_len` floats after the header: present, finite, CQ2/CQ3/CQ4 each ascending.
absl::Status ReadCodebook(const DirectoryView& d, std::vector<float>* codebook);
// The `num_tensors` records after the codebook, all present.
absl::Status ReadRecords(const DirectoryView& d, std::vector<TensorRecord>* records);

// Record i against the canonical spec of its position, in the order: the dtype its kind
// allows (first, so that a wrong dtype is reported as such rather than as a size), its own
// fields (pad, ndim, unused dims, CQ bits and group, nbytes from the shape with overflow
// checked, offset aligned and inside the file), then ndim and shape (not for the tokenizer).
absl::Status CheckRecord(const DirectoryView& d, uint32_t i, const TensorSpec& spec,
                         const TensorRecord& r);
// The RAW tokenizer blob (record i) parses and holds `vocab` pieces, or with `fewer_allowed`
// (Needle 3, whose rows above the tokenizer are input-only code embeddings) at most that many.
absl::Status CheckTokenizerRecord(const DirectoryView& d, uint32_t i, const TensorRecord& r,
                                  uint32_t vocab, bool fewer_allowed);
// No two blobs overlap and the file ends exactly where the last blob ends.
absl::Status CheckBlobsTile(const DirectoryView& d, const std::vector<TensorRecord>& records,
                            const std::vector<TensorSpec>& specs);

}  // namespace cact
