// Checks of a .cact directory that do not depend on the architecture: the codebook values,
// one record's own fields (dtype table, ndim, group/bits, nbytes from its shape, offset
// alignment and bounds), and that the blobs neither overlap nor leave bytes after the last
// one. The generation-3 reader uses them; their messages are those of generation 2.
#pragma once
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "formats/cact/header.h"

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
// A record's own consistency (dtype already known to be 1..4): pad, ndim, unused dims, CQ
// bits and group (non-CQ: 0), nbytes from the shape (overflow-checked), offset.
absl::Status CheckRecordFields(const DirectoryView& d, uint32_t i, const std::string& name,
                               const TensorRecord& r);
// No two blobs overlap and the file ends exactly where the last blob ends.
absl::Status CheckBlobsTile(const DirectoryView& d, const std::vector<TensorRecord>& records,
                            const std::vector<std::string>& names);

}  // namespace cact
